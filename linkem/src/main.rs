mod afpacket;
mod codel;
mod config;
mod control;
mod dist;
mod emu;
mod engine;
mod frame;
mod gso;
mod link;
mod ringhold;
mod rng;
mod schema;
mod stats;
mod transit;

use clap::{Parser, Subcommand, ValueEnum};
use engine::{Dir, Engine, Mode, Port, Shared, TimingOpts};
use serde_json::json;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[derive(Parser, Debug)]
#[command(name = "linkem", version, about = "User-space netem: emulates a bidirectional link between two interfaces (AF_PACKET)")]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Interface facing the client (side A; A->B is "up")
    #[arg(long)]
    iface_a: Option<String>,
    /// MAC address of the client (next hop for frames sent out of A)
    #[arg(long)]
    a_peer_mac: Option<String>,
    /// Interface facing the server (side B; B->A is "down")
    #[arg(long)]
    iface_b: Option<String>,
    /// MAC address of the server (next hop for frames sent out of B)
    #[arg(long)]
    b_peer_mac: Option<String>,
    /// JSON config file ({"up": {...}, "down": {...}}); absent = transparent link
    #[arg(long)]
    config: Option<String>,
    /// Unix stream socket for run-time control (stats / set / reset)
    #[arg(long)]
    control: Option<String>,
    /// Write the final counters (JSON) here at exit
    #[arg(long)]
    stats_out: Option<String>,
    /// RNG seed (reproducible loss/jitter/...); default: random
    #[arg(long)]
    seed: Option<u64>,
    /// Validate the config and exit (no sockets opened)
    #[arg(long)]
    check: bool,
    // ---- timing-strategy knobs (defaults = the measured choice, see DESIGN.md)
    #[arg(long, value_enum, default_value = "sleep", hide = true)]
    timing: TimingArg,
    /// Maximum adaptive spin before a deadline (0 = never spin)
    #[arg(long, default_value_t = 50, hide = true)]
    spin_us: u64,
    /// CPU budget for spinning, percent of one core
    #[arg(long, default_value_t = 10, hide = true)]
    spin_budget_pct: u64,
    /// Minimum spacing of timer wake-ups under load
    #[arg(long, default_value_t = 50, hide = true)]
    coalesce_us: u64,
    /// Overload guard: drop arrivals while the oldest due packet is this late (0 = off)
    #[arg(long, default_value_t = 10.0)]
    max_late_ms: f64,
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, hide = true)]
    rx_defer: bool,
    /// Longest wait before reading the rings when every direction has a delay
    /// (default 2000 µs, with --gso 1000: its rings hold 512 frames)
    #[arg(long, hide = true)]
    max_defer_us: Option<u64>,
    /// 1 = one event loop for both directions, 2 = one thread per direction
    #[arg(long, default_value_t = 1, hide = true)]
    threads: u32,
    /// SCHED_FIFO priority for the forwarding thread (0 = normal CFS scheduling)
    #[arg(long, default_value_t = 10)]
    fifo_prio: i32,
    /// RX ring size in frames per interface (default 16384, with --gso 1024)
    #[arg(long, hide = true)]
    ring_frames: Option<usize>,
    /// Accept GSO super-frames (endpoints with TSO/GSO on): 68 KiB ring frames,
    /// the pipeline runs per wire segment, see DESIGN.md
    #[arg(long)]
    gso: bool,
    /// With --gso: consecutive segments leaving within this window go out as
    /// one frame (what the receiver's GRO would merge)
    #[arg(long, default_value_t = 50)]
    gro_window_us: u64,
    /// Maximum packets buffered per direction (delay line + queue)
    #[arg(long, default_value_t = 262144, hide = true)]
    max_packets: usize,
    /// Disable PACKET_VNET_HDR (checksum offload passthrough)
    #[arg(long, hide = true)]
    no_vnet: bool,
    /// Leave the router's kernel to process (and drop) transit frames itself
    /// instead of dropping them at ingress with nftables (see src/transit.rs)
    #[arg(long, hide = true)]
    kernel_sees_transit: bool,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum TimingArg {
    Sleep,
    Busy,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Talk to a running linkem: stats | lateness | set JSON | reset
    Ctl {
        #[arg(long)]
        control: String,
        #[arg(required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
}

fn die(code: i32, msg: &str) -> ! {
    eprintln!("{}", msg);
    std::process::exit(code);
}

extern "C" fn on_signal(_sig: libc::c_int) {
    engine::STOP.store(true, Ordering::SeqCst);
    for f in engine::SIG_WAKE_FDS.iter() {
        let fd = f.load(Ordering::SeqCst);
        if fd >= 0 {
            let one: u64 = 1;
            unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
        }
    }
}

fn install_signals() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

fn main() {
    let cli = Cli::parse();
    if let Some(Cmd::Ctl { control, words }) = &cli.cmd {
        std::process::exit(control::client(control, words));
    }

    let cfg = match &cli.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).unwrap_or_else(|e| die(2, &format!("config: cannot read {}: {}", p, e)));
            config::parse_config_str(&text).unwrap_or_else(|e| die(2, &e))
        }
        None => config::Config::default(),
    };
    if cli.check {
        println!("config ok");
        return;
    }
    let need = |v: &Option<String>, name: &str| -> String {
        v.clone().unwrap_or_else(|| die(2, &format!("args: {} is required", name)))
    };
    let iface_a = need(&cli.iface_a, "--iface-a");
    let iface_b = need(&cli.iface_b, "--iface-b");
    let a_peer = afpacket::parse_mac(&need(&cli.a_peer_mac, "--a-peer-mac"))
        .unwrap_or_else(|| die(2, "args: --a-peer-mac: expected a MAC like 02:00:00:00:00:01"));
    let b_peer = afpacket::parse_mac(&need(&cli.b_peer_mac, "--b-peer-mac"))
        .unwrap_or_else(|| die(2, "args: --b-peer-mac: expected a MAC like 02:00:00:00:00:01"));
    if cli.threads != 1 && cli.threads != 2 {
        die(2, "args: --threads must be 1 or 2");
    }

    let ia = afpacket::if_info(&iface_a).unwrap_or_else(|e| die(1, &format!("linkem: --iface-a: {}", e)));
    let ib = afpacket::if_info(&iface_b).unwrap_or_else(|e| die(1, &format!("linkem: --iface-b: {}", e)));
    let want_vnet = !cli.no_vnet;
    if cli.gso && cli.no_vnet {
        die(2, "args: --gso needs the vnet header (drop --no-vnet)");
    }
    let (frame_size, ring_frames) = if cli.gso { (engine::BIG_SLOT.next_multiple_of(4096), cli.ring_frames.unwrap_or(1024)) } else { (2048, cli.ring_frames.unwrap_or(16384)) };
    let rx_a = afpacket::RxRing::open(ia.index, ring_frames, frame_size, want_vnet).unwrap_or_else(|e| die(1, &format!("linkem: {}: {}", ia.name, e)));
    let rx_b = afpacket::RxRing::open(ib.index, ring_frames, frame_size, want_vnet).unwrap_or_else(|e| die(1, &format!("linkem: {}: {}", ib.name, e)));
    let tx_b = afpacket::TxSock::open(ib.index, want_vnet && rx_a.vnet).unwrap_or_else(|e| die(1, &format!("linkem: {}: {}", ib.name, e)));
    let tx_a = afpacket::TxSock::open(ia.index, want_vnet && rx_b.vnet).unwrap_or_else(|e| die(1, &format!("linkem: {}: {}", ia.name, e)));

    let shared = Arc::new(Shared::new());
    let seed = cli.seed.unwrap_or_else(rng::Rng::entropy_seed);
    let now = engine::mono_ns();
    let up_cfg = cfg.up.clone().unwrap_or_default();
    let down_cfg = cfg.down.clone().unwrap_or_default();
    *shared.current[0].lock().unwrap() = up_cfg.source.clone();
    *shared.current[1].lock().unwrap() = down_cfg.source.clone();
    let vnet = rx_a.vnet && rx_b.vnet && tx_a.vnet && tx_b.vnet;
    if cli.gso && !vnet {
        die(1, "linkem: --gso: this kernel refused PACKET_VNET_HDR");
    }
    let mut up = Dir::new(0, emu::Emu::new(up_cfg, seed ^ emu::DIR_SEED[0], now), tx_b, ib.mac, b_peer, shared.dir_stats[0].clone(), cli.max_packets,
        rx_a.layout());
    let mut down = Dir::new(1, emu::Emu::new(down_cfg, seed ^ emu::DIR_SEED[1], now), tx_a, ia.mac, a_peer, shared.dir_stats[1].clone(), cli.max_packets,
        rx_b.layout());
    up.gro_window_ns = cli.gro_window_us * 1000;
    down.gro_window_ns = cli.gro_window_us * 1000;
    let port_a = Port { name: ia.name.clone(), mac: ia.mac, rx: rx_a, stats: shared.port_stats[0].clone() };
    let port_b = Port { name: ib.name.clone(), mac: ib.mac, rx: rx_b, stats: shared.port_stats[1].clone() };

    let timing = TimingOpts {
        mode: match cli.timing {
            TimingArg::Sleep => Mode::Sleep,
            TimingArg::Busy => Mode::Busy,
        },
        spin_ns: cli.spin_us * 1000,
        coalesce_ns: cli.coalesce_us * 1000,
        rx_defer: cli.rx_defer,
        max_defer_ns: cli.max_defer_us.unwrap_or(if cli.gso { 1000 } else { 2000 }) * 1000,
        spin_budget_pct: cli.spin_budget_pct,
        max_late_ns: (cli.max_late_ms * 1e6) as u64,
    };
    // the router's kernel stops processing the frames we forward (after our rings see them)
    let mut transit_v4 = frame::LocalAddrs::read().v4;
    let mut transit = if cli.kernel_sees_transit {
        None
    } else {
        match transit::TransitDrop::start(&[ia.name.clone(), ib.name.clone()], &transit_v4) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("linkem: transit frames are left to the kernel ({})", e);
                None
            }
        }
    };
    let info = json!({
        "kernel_transit": if transit.is_some() { "dropped at ingress (nft)" } else { "processed by the kernel" },
        "timing_strategy": timing.describe(),
        "threads": cli.threads,
        "vnet_hdr": vnet,
        "gso": cli.gso,
        "gro_window_us": cli.gro_window_us,
        "seed": seed,
        "ifaces": {"a": ia.name, "b": ib.name},
    });

    let engines: Vec<Engine> = if cli.threads == 1 {
        vec![Engine::new(vec![port_a, port_b], vec![up, down], shared.clone(), timing.clone())]
    } else {
        vec![
            Engine::new(vec![port_a], vec![up], shared.clone(), timing.clone()),
            Engine::new(vec![port_b], vec![down], shared.clone(), timing.clone()),
        ]
    };

    let ctl = Arc::new(control::Ctl {
        shared: shared.clone(),
        base: std::sync::Mutex::new(control::Snapshot::default()),
        start: now,
        info,
        port_names: [ia.name.clone(), ib.name.clone()],
        sched: std::sync::Mutex::new(String::new()),
    });
    if let Some(path) = &cli.control {
        // (an exit closes nft's input: the kernel then deletes the rules)
        control::serve(ctl.clone(), path.clone()).unwrap_or_else(|e| die(1, &format!("linkem: --control {}: {}", path, e)));
    }
    install_signals();

    let fifo = cli.fifo_prio;
    let sched_ok = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let nthreads = engines.len();
    let handles: Vec<_> = engines
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            let sched_ok = sched_ok.clone();
            std::thread::Builder::new()
                .name(format!("linkem-fwd{}", i))
                .spawn(move || {
                    if fifo > 0 {
                        let p = libc::sched_param { sched_priority: fifo };
                        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0 {
                            sched_ok.fetch_add(1, Ordering::SeqCst);
                        } else {
                            eprintln!("linkem: SCHED_FIFO {} not available ({}), using normal scheduling", fifo, std::io::Error::last_os_error());
                        }
                    }
                    e.run();
                })
                .expect("spawn")
        })
        .collect();
    // wait (briefly) for the threads to have set their scheduling class
    for _ in 0..100 {
        if fifo <= 0 || sched_ok.load(Ordering::SeqCst) >= nthreads {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    *ctl.sched.lock().unwrap() = if fifo > 0 && sched_ok.load(Ordering::SeqCst) >= nthreads {
        format!("SCHED_FIFO:{}", fifo)
    } else {
        "SCHED_OTHER".to_string()
    };
    println!("ready");
    let _ = std::io::stdout().flush();

    if let Some(t) = transit.as_mut() {
        // the namespace's addresses may change: keep the rules letting them through
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(std::time::Duration::from_millis(200));
            let now = frame::LocalAddrs::read().v4;
            if now != transit_v4 {
                if let Err(e) = t.update(&now) {
                    eprintln!("linkem: updating the transit rules: {}", e);
                }
                transit_v4 = now;
            }
        }
    }
    for h in handles {
        let _ = h.join();
    }
    drop(transit);
    let final_stats = ctl.stats_json().to_string();
    if let Some(p) = &cli.stats_out {
        if let Err(e) = std::fs::write(p, format!("{}\n", final_stats)) {
            eprintln!("linkem: --stats-out {}: {}", p, e);
        }
    }
    println!("{}", final_stats);
    let _ = std::io::stdout().flush();
    if let Some(path) = &cli.control {
        let _ = std::fs::remove_file(path);
    }
    std::process::exit(0);
}

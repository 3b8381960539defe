//! The configuration: checked against the embedded schema (schema.rs: fields, types, bounds, as
//! quicbench's impairment table generates them), then the rules between fields, the defaults and
//! the typed `DirConfig` the engine runs.
//!
//! Errors are one line, `config: <path>: <problem>`, e.g.
//! `config: up.loss.pct: must be between 0 and 100, got 120`.

use crate::codel::{CodelParams, DEFAULT_INTERVAL_NS, DEFAULT_TARGET_NS};
use crate::dist::{pct_to_u32, JitterDist};
use crate::schema;
use serde_json::{Map, Value};
use std::sync::Arc;

pub const MS: u64 = 1_000_000;
/// Bytes one mahimahi delivery opportunity can carry (an MTU-sized IP packet).
pub const TRACE_OPP_BYTES: u32 = 1500;
/// Default queue when neither `rate_mbit` nor `trace` is set but `onoff` is.
pub const DEFAULT_QUEUE_PACKETS_NO_RATE: u64 = 1000;
/// Minimum default queue (in full-size frames) when a rate is set.
pub const DEFAULT_QUEUE_MIN_PACKETS: u64 = 64;
/// A full-size packet as the rate counts it by default (IP bytes, MTU 1500).
pub const FULL_PACKET: u64 = 1500;

#[derive(Clone, Debug, PartialEq)]
pub enum Loss {
    None,
    /// netem `loss random PCT [CORR]`: probability and correlation on the u32 scale.
    Random { p: u32, corr: u32 },
    /// netem `loss gemodel p r 1-h 1-k` (u32 scale):
    /// p = P(Good->Bad), r = P(Bad->Good), loss_bad = 1-h, loss_good = 1-k.
    GilbertElliott { p: u32, r: u32, loss_bad: u32, loss_good: u32 },
}

#[derive(Clone, Debug, PartialEq)]
pub enum QueueLimit {
    Packets(u64),
    Bytes(u64),
    /// Maximum waiting time (ns) a newly arriving packet may face.
    Time(u64),
    Unlimited,
}

/// How the bottleneck queue decides what to drop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Discipline {
    /// Drop-tail at the queue limit.
    Fifo,
    /// CoDel (RFC 8289) at dequeue, within the same limit.
    Codel(CodelParams),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Spikes {
    pub period_ns: u64,
    pub duration_ns: u64,
    pub rate_frac: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OnOff {
    pub on_ns: u64,
    pub off_ns: u64,
}

#[derive(Debug, PartialEq)]
pub struct Trace {
    pub path: String,
    /// Delivery opportunities, ms offsets within one period (non-decreasing).
    pub opps_ms: Vec<u64>,
    /// Loop period in ms (= last timestamp).
    pub period_ms: u64,
}

impl Trace {
    pub fn mean_rate_bps(&self) -> f64 {
        self.opps_ms.len() as f64 * TRACE_OPP_BYTES as f64 * 8.0 / (self.period_ms as f64 / 1000.0)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct DirConfig {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    pub jitter_dist: JitterDist,
    pub jitter_corr: u32,
    pub reorder: bool,
    pub loss: Loss,
    pub duplicate: u32,
    pub corrupt: u32,
    pub rate_bps: Option<f64>,
    /// Bytes the rate counts per packet on top of its IP length (0 = IP bytes,
    /// as mahimahi; 14 = Ethernet header, as tbf/htb/netem count on Ethernet).
    pub rate_overhead: u32,
    /// Effective queue limit (defaults already resolved).
    pub queue: QueueLimit,
    pub queue_is_default: bool,
    pub discipline: Discipline,
    pub spikes: Option<Spikes>,
    pub onoff: Option<OnOff>,
    pub trace: Option<Arc<Trace>>,
    /// The JSON this was built from (echoed in stats).
    pub source: Value,
}

impl Default for DirConfig {
    fn default() -> Self {
        DirConfig {
            delay_ns: 0,
            jitter_ns: 0,
            jitter_dist: JitterDist::Uniform,
            jitter_corr: 0,
            reorder: false,
            loss: Loss::None,
            duplicate: 0,
            corrupt: 0,
            rate_bps: None,
            rate_overhead: 0,
            queue: QueueLimit::Unlimited,
            queue_is_default: true,
            discipline: Discipline::Fifo,
            spikes: None,
            onoff: None,
            trace: None,
            source: Value::Object(Map::new()),
        }
    }
}

impl DirConfig {
    /// Lower bound (ns) of the extra delay a packet gets after the bottleneck.
    pub fn min_delay_ns(&self) -> u64 {
        if self.jitter_ns == 0 {
            return self.delay_ns;
        }
        let lo = self.delay_ns as f64 + self.jitter_dist.min_factor() * self.jitter_ns as f64;
        if lo <= 0.0 { 0 } else { lo as u64 }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    pub up: Option<DirConfig>,
    pub down: Option<DirConfig>,
    /// `set` only: restart both directions' random draws from this seed (each direction mixes
    /// in its own constant, as at start), so a trial meets the same loss/jitter sequence again
    pub seed: Option<u64>,
}

pub type Res<T> = Result<T, String>;

fn err<T>(path: &str, msg: impl AsRef<str>) -> Res<T> {
    Err(format!("config: {}: {}", path, msg.as_ref()))
}

fn show(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        _ => v.to_string(),
    }
}

/// A number the schema already checked (type and bounds).
fn num(v: &Value) -> f64 {
    v.as_f64().expect("checked against the schema")
}

fn obj<'a>(v: &'a Value, path: &str) -> Res<&'a Map<String, Value>> {
    match v.as_object() {
        Some(m) => Ok(m),
        None => err(path, format!("expected an object, got {}", show(v))),
    }
}

fn ms_to_ns(ms: f64) -> u64 {
    (ms * MS as f64).round() as u64
}

pub fn parse_config_str(text: &str) -> Res<Config> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("config: invalid JSON: {}", e))?;
    parse_config(&v)
}

/// The whole configuration (`--config`, the control socket's `set`): checked against the
/// schema (fields, types, bounds), then the rules between fields.
pub fn parse_config(v: &Value) -> Res<Config> {
    obj(v, "(top level)")?;
    schema::validate(v, schema::schema(), "")?;
    let m = v.as_object().expect("an object");
    let mut c = Config::default();
    if let Some(s) = m.get("seed") {
        c.seed = Some(s.as_u64().ok_or_else(|| "seed: expected an integer from 0 to 2^64-1".to_string())?);
    }
    if let Some(u) = m.get("up") {
        c.up = Some(parse_dir(u, "up")?);
    }
    if let Some(d) = m.get("down") {
        c.down = Some(parse_dir(d, "down")?);
    }
    Ok(c)
}

/// One direction: its fields, types and bounds as the schema (schema.json) says, then the
/// rules between fields and the defaults.
pub fn parse_dir(v: &Value, path: &str) -> Res<DirConfig> {
    schema::validate(v, &schema::schema()["$defs"]["direction"], path)?;
    let m = obj(v, path)?;
    let p = |k: &str| format!("{}.{}", path, k);
    let got = |k: &str| m.get(k).filter(|x| !x.is_null());
    let mut c = DirConfig { source: v.clone(), ..Default::default() };

    if let Some(x) = got("delay_ms") {
        c.delay_ns = ms_to_ns(num(x));
    }
    if let Some(x) = got("jitter_ms") {
        c.jitter_ns = ms_to_ns(num(x));
    }
    if let Some(x) = got("jitter_dist") {
        c.jitter_dist = JitterDist::parse(x.as_str().expect("a string")).expect("one of the schema's names");
    }
    if let Some(x) = got("jitter_correlation_pct") {
        c.jitter_corr = pct_to_u32(num(x));
    }
    if let Some(x) = got("reorder") {
        c.reorder = x.as_bool().expect("a boolean");
    }
    if let Some(x) = got("loss") {
        c.loss = parse_loss(x, &p("loss"))?;
    }
    if let Some(x) = got("duplicate_pct") {
        c.duplicate = pct_to_u32(num(x));
    }
    if let Some(x) = got("corrupt_pct") {
        c.corrupt = pct_to_u32(num(x));
    }
    if let Some(x) = got("rate_mbit") {
        c.rate_bps = Some(num(x) * 1e6);
    }
    if let Some(x) = got("rate_overhead_bytes") {
        c.rate_overhead = x.as_u64().expect("an integer") as u32;
    }
    if let Some(x) = got("spikes") {
        let sm = x.as_object().expect("an object");
        let period = num(&sm["period_ms"]);
        let duration = sm.get("duration_ms").map_or(200.0, num);
        if duration > period {
            return err(&format!("{}.duration_ms", p("spikes")), format!("must be <= period_ms ({}), got {}", period, duration));
        }
        let rate_pct = sm.get("rate_pct").map_or(10.0, num);
        c.spikes = Some(Spikes { period_ns: ms_to_ns(period), duration_ns: ms_to_ns(duration), rate_frac: rate_pct / 100.0 });
    }
    if let Some(x) = got("onoff") {
        let om = x.as_object().expect("an object");
        c.onoff = Some(OnOff { on_ns: ms_to_ns(num(&om["on_ms"])), off_ns: ms_to_ns(num(&om["off_ms"])) });
    }
    if let Some(x) = got("trace") {
        let tp = p("trace");
        let path_s = x.as_str().expect("a string");
        let text = std::fs::read_to_string(path_s).map_err(|e| format!("config: {}: cannot read {}: {}", tp, path_s, e))?;
        let t = parse_trace(&text, path_s).map_err(|e| format!("config: {}: {}", tp, e))?;
        c.trace = Some(Arc::new(t));
    }
    if c.trace.is_some() && c.rate_bps.is_some() {
        return err(&p("trace"), "cannot be combined with rate_mbit (the trace replaces the rate)");
    }
    if c.spikes.is_some() && c.rate_bps.is_none() {
        return err(&p("spikes"), "requires rate_mbit");
    }

    // Queue limit, with documented defaults.
    let queue_given = got("queue");
    c.queue_is_default = queue_given.is_none();
    c.queue = match queue_given {
        Some(q) => {
            let qp = p("queue");
            let qm: Map<String, Value> = q.as_object().expect("an object").iter()
                .filter(|(_, x)| !x.is_null()).map(|(k, x)| (k.clone(), x.clone())).collect();
            if qm.len() != 1 {
                return err(&qp, "must have exactly one of packets, bytes, ms");
            }
            let (k, v) = qm.iter().next().unwrap();
            match k.as_str() {
                "packets" => QueueLimit::Packets(v.as_u64().expect("an integer")),
                "bytes" => QueueLimit::Bytes(v.as_u64().expect("an integer")),
                _ => QueueLimit::Time(ms_to_ns(num(v))),
            }
        }
        None => default_queue(&c),
    };
    c.discipline = parse_discipline(m, path, c.rate_bps.is_some() || c.trace.is_some())?;
    Ok(c)
}

/// `queue_discipline` ("fifo" | "codel") and CoDel's `codel_target_ms` (5) and
/// `codel_interval_ms` (100); CoDel needs a bottleneck (a rate or a trace), and its target is
/// not above its interval.
fn parse_discipline(m: &Map<String, Value>, path: &str, bottleneck: bool) -> Res<Discipline> {
    let p = |k: &str| format!("{}.{}", path, k);
    let got = |k: &str| m.get(k).filter(|x| !x.is_null());
    let name = got("queue_discipline").map_or("fifo", |x| x.as_str().expect("a string"));
    let ms = |k: &str, default_ns: u64| -> u64 { got(k).map_or(default_ns, |x| ms_to_ns(num(x)).max(1)) };
    match name {
        "codel" => {
            if !bottleneck {
                return err(&p("queue_discipline"), "codel needs rate_mbit or trace (a bottleneck queue)");
            }
            let (target_ns, interval_ns) = (ms("codel_target_ms", DEFAULT_TARGET_NS), ms("codel_interval_ms", DEFAULT_INTERVAL_NS));
            if target_ns > interval_ns {
                return err(&p("codel_target_ms"), format!("must not be above codel_interval_ms ({} ms), got {} ms",
                                                        interval_ns as f64 / 1e6, target_ns as f64 / 1e6));
            }
            Ok(Discipline::Codel(CodelParams { target_ns, interval_ns }))
        }
        _ => {
            for k in ["codel_target_ms", "codel_interval_ms"] {
                if got(k).is_some() {
                    return err(&p(k), "needs queue_discipline \"codel\"");
                }
            }
            Ok(Discipline::Fifo)
        }
    }
}

/// Default drop-tail limit: with a rate (or a trace, using its mean rate), the
/// larger of one BDP at that rate over max(2*delay, 20 ms) and 64 full frames,
/// in bytes; with only on/off, 1000 packets; otherwise no bottleneck queue.
pub fn default_queue(c: &DirConfig) -> QueueLimit {
    let rate = c.rate_bps.or(c.trace.as_ref().map(|t| t.mean_rate_bps()));
    match rate {
        Some(r) => {
            let rtt_s = ((2 * c.delay_ns) as f64 / 1e9).max(0.020);
            let bdp = (r / 8.0 * rtt_s).ceil() as u64;
            QueueLimit::Bytes(bdp.max(DEFAULT_QUEUE_MIN_PACKETS * FULL_PACKET))
        }
        None if c.onoff.is_some() => QueueLimit::Packets(DEFAULT_QUEUE_PACKETS_NO_RATE),
        None => QueueLimit::Unlimited,
    }
}

fn parse_loss(v: &Value, path: &str) -> Res<Loss> {
    let m = obj(v, path)?;
    let model = m.get("model").and_then(Value::as_str).unwrap_or("random");
    let f = |k: &str| format!("{}.{}", path, k);
    let pct = |k: &str| m.get(k).filter(|x| !x.is_null()).map(num);
    let only = |keys: &[&str]| -> Res<()> {
        match m.keys().find(|k| !keys.contains(&k.as_str())) {
            Some(k) => err(&f(k), format!("not a field of model {} (its fields: {})", model, keys.join(", "))),
            None => Ok(()),
        }
    };
    match model {
        "random" => {
            only(&["model", "pct", "correlation_pct"])?;
            let Some(p) = pct("pct") else { return err(&f("pct"), "required for model random") };
            if p == 0.0 {
                return Ok(Loss::None);
            }
            Ok(Loss::Random { p: pct_to_u32(p), corr: pct_to_u32(pct("correlation_pct").unwrap_or(0.0)) })
        }
        _ => {
            only(&["model", "p_pct", "r_pct", "h_pct", "k_pct"])?;
            let Some(p) = pct("p_pct") else { return err(&f("p_pct"), "required for model gilbert_elliott") };
            // netem's `loss gemodel p r 1-h 1-k`: the loss probability in the bad state is
            // 100 - h, in the good state 100 - k; tc's defaults: r = 100 - p, h = 0, k = 100.
            let r = pct("r_pct").unwrap_or(100.0 - p);
            let h = pct("h_pct").unwrap_or(0.0);
            let k = pct("k_pct").unwrap_or(100.0);
            Ok(Loss::GilbertElliott { p: pct_to_u32(p), r: pct_to_u32(r), loss_bad: pct_to_u32(100.0 - h), loss_good: pct_to_u32(100.0 - k) })
        }
    }
}

/// Parse a mahimahi trace: one non-negative integer ms timestamp per line,
/// non-decreasing; each line is one 1500-byte delivery opportunity; the trace
/// repeats with a period equal to its last timestamp (which must be > 0).
/// Empty lines are ignored.
pub fn parse_trace(text: &str, name: &str) -> Result<Trace, String> {
    let mut opps = Vec::new();
    let mut prev = 0u64;
    for (i, line) in text.lines().enumerate() {
        let s = line.trim();
        if s.is_empty() {
            continue;
        }
        let v: u64 = match s.parse() {
            Ok(v) => v,
            Err(_) => {
                return Err(format!(
                    "{} line {}: expected a non-negative integer millisecond timestamp, got \"{}\"",
                    name, i + 1, s
                ))
            }
        };
        if v < prev {
            return Err(format!("{} line {}: timestamp {} is smaller than the previous one ({})", name, i + 1, v, prev));
        }
        prev = v;
        opps.push(v);
    }
    if opps.is_empty() {
        return Err(format!("{}: trace has no delivery opportunities", name));
    }
    let period = *opps.last().unwrap();
    if period == 0 {
        return Err(format!("{}: last timestamp must be > 0 (it is the loop period)", name));
    }
    Ok(Trace { path: name.to_string(), opps_ms: opps, period_ms: period })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(s: &str) -> String {
        parse_config_str(s).unwrap_err()
    }

    #[test]
    fn validation_messages() {
        assert_eq!(
            e(r#"{"up": {"loss": {"model": "random", "pct": 120}}}"#),
            "config: up.loss.pct: must be between 0 and 100, got 120"
        );
        assert_eq!(e(r#"{"down": {"delay_ms": -1}}"#), "config: down.delay_ms: must be between 0 and 60000, got -1");
        assert_eq!(e(r#"{"up": {"delay_ms": "5"}}"#), r#"config: up.delay_ms: expected a number, got "5""#);
        assert!(e(r#"{"up": {"dealy_ms": 5}}"#).starts_with("config: up.dealy_ms: unknown field"));
        assert!(e(r#"{"sideways": {}}"#).starts_with("config: sideways: unknown field"));
        assert_eq!(
            e(r#"{"up": {"jitter_dist": "gauss"}}"#),
            r#"config: up.jitter_dist: must be one of uniform, normal, pareto, paretonormal, got "gauss""#
        );
        assert_eq!(e(r#"{"up": {"rate_mbit": 0}}"#), "config: up.rate_mbit: must be between 0.001 and 100000, got 0");
        assert_eq!(
            e(r#"{"up": {"rate_mbit": 5, "rate_overhead_bytes": -14}}"#),
            "config: up.rate_overhead_bytes: must be an integer between 0 and 1000, got -14"
        );
        assert_eq!(e(r#"{"up": {"queue": {"packets": 0}}}"#), "config: up.queue.packets: must be an integer between 1 and 1000000, got 0");
        assert_eq!(e(r#"{"up": {"queue": {"packets": 5, "ms": 3}}}"#), "config: up.queue: must have exactly one of packets, bytes, ms");
        assert_eq!(e(r#"{"up": {"spikes": {"period_ms": 1000}}}"#), "config: up.spikes: requires rate_mbit");
        assert_eq!(
            e(r#"{"up": {"rate_mbit": 5, "spikes": {"period_ms": 100, "duration_ms": 200}}}"#),
            "config: up.spikes.duration_ms: must be <= period_ms (100), got 200"
        );
        assert_eq!(e(r#"{"up": {"onoff": {"on_ms": 10}}}"#), "config: up.onoff.off_ms: required");
        assert_eq!(
            e(r#"{"up": {"loss": {"model": "bursty"}}}"#),
            r#"config: up.loss.model: must be one of random, gilbert_elliott, got "bursty""#
        );
        assert_eq!(e(r#"{"up": {"loss": {"model": "gilbert_elliott", "r_pct": 5}}}"#), "config: up.loss.p_pct: required for model gilbert_elliott");
        assert!(e(r#"{"up": {"trace": "/nonexistent/x.trace"}}"#).starts_with("config: up.trace: cannot read /nonexistent/x.trace"));
        assert!(e("{").starts_with("config: invalid JSON"));
        assert_eq!(e(r#"{"up": 5}"#), "config: up: expected an object, got 5");
        assert_eq!(
            e(r#"{"up": {"rate_mbit": 5, "queue_discipline": "red"}}"#),
            r#"config: up.queue_discipline: must be one of fifo, codel, got "red""#
        );
        assert_eq!(
            e(r#"{"down": {"queue_discipline": "codel"}}"#),
            "config: down.queue_discipline: codel needs rate_mbit or trace (a bottleneck queue)"
        );
        assert_eq!(
            e(r#"{"up": {"rate_mbit": 5, "codel_target_ms": 5}}"#),
            r#"config: up.codel_target_ms: needs queue_discipline "codel""#
        );
        assert_eq!(
            e(r#"{"up": {"rate_mbit": 5, "queue_discipline": "codel", "codel_interval_ms": 0}}"#),
            "config: up.codel_interval_ms: must be > 0 and <= 10000, got 0"
        );
        assert_eq!(
            e(r#"{"up": {"rate_mbit": 5, "queue_discipline": "codel", "codel_target_ms": 200}}"#),
            "config: up.codel_target_ms: must not be above codel_interval_ms (100 ms), got 200 ms"
        );
        assert_eq!(e(r#"{"up": {"jitter_ms": 3000}}"#), "config: up.jitter_ms: must be between 0 and 2000, got 3000");
        assert_eq!(e(r#"{"up": {"reorder": "yes"}}"#), r#"config: up.reorder: expected true or false, got "yes""#);
        assert_eq!(
            e(r#"{"up": {"loss": {"model": "random", "pct": 1, "p_pct": 5}}}"#),
            "config: up.loss.p_pct: not a field of model random (its fields: model, pct, correlation_pct)"
        );
    }

    #[test]
    fn codel_defaults_follow_rfc_8289() {
        let c = parse_config_str(r#"{"up": {"rate_mbit": 10, "queue_discipline": "codel"}}"#).unwrap();
        assert_eq!(c.up.unwrap().discipline, Discipline::Codel(CodelParams { target_ns: 5_000_000, interval_ns: 100_000_000 }));
        let c = parse_config_str(r#"{"up": {"rate_mbit": 10, "queue_discipline": "codel", "codel_target_ms": 2.5, "codel_interval_ms": 50}}"#).unwrap();
        assert_eq!(c.up.unwrap().discipline, Discipline::Codel(CodelParams { target_ns: 2_500_000, interval_ns: 50_000_000 }));
        let c = parse_config_str(r#"{"up": {"rate_mbit": 10}}"#).unwrap();
        assert_eq!(c.up.unwrap().discipline, Discipline::Fifo);
    }

    #[test]
    fn defaults_are_transparent() {
        let c = parse_config_str(r#"{"up": {}}"#).unwrap();
        let u = c.up.unwrap();
        assert_eq!(u.delay_ns, 0);
        assert_eq!(u.loss, Loss::None);
        assert_eq!(u.queue, QueueLimit::Unlimited);
        assert!(c.down.is_none());
        let c = parse_config_str(r#"{"up": {"delay_ms": 2.5, "rate_mbit": null, "loss": {"pct": 1, "correlation_pct": 25}}}"#).unwrap();
        let u = c.up.unwrap();
        assert_eq!(u.delay_ns, 2_500_000);
        assert!(matches!(u.loss, Loss::Random { .. }));
        assert_eq!(u.min_delay_ns(), 2_500_000);
    }

    #[test]
    fn gemodel_defaults_follow_tc() {
        let c = parse_config_str(r#"{"up": {"loss": {"model": "gilbert_elliott", "p_pct": 10}}}"#).unwrap();
        match c.up.unwrap().loss {
            Loss::GilbertElliott { p, r, loss_bad, loss_good } => {
                assert_eq!(p, pct_to_u32(10.0));
                assert_eq!(r, pct_to_u32(90.0));
                assert_eq!(loss_bad, u32::MAX);
                assert_eq!(loss_good, 0);
            }
            other => panic!("{:?}", other),
        }
    }

    #[test]
    fn trace_parsing() {
        let t = parse_trace("0\n5\n5\n\n12\n", "a.trace").unwrap();
        assert_eq!(t.opps_ms, vec![0, 5, 5, 12]);
        assert_eq!(t.period_ms, 12);
        assert_eq!(
            parse_trace("1\n2\nx3\n", "b.trace").unwrap_err(),
            r#"b.trace line 3: expected a non-negative integer millisecond timestamp, got "x3""#
        );
        assert_eq!(parse_trace("1\n-2\n", "c").unwrap_err(), r#"c line 2: expected a non-negative integer millisecond timestamp, got "-2""#);
        assert_eq!(parse_trace("5\n3\n", "d").unwrap_err(), "d line 2: timestamp 3 is smaller than the previous one (5)");
        assert!(parse_trace("\n\n", "e").unwrap_err().contains("no delivery opportunities"));
        assert!(parse_trace("0\n0\n", "f").unwrap_err().contains("must be > 0"));
        // through the config, with the field path
        let dir = std::env::temp_dir().join(format!("linkem-test-{}.trace", std::process::id()));
        std::fs::write(&dir, "1\n2\nbad\n").unwrap();
        let msg = e(&format!(r#"{{"down": {{"trace": "{}"}}}}"#, dir.display()));
        assert_eq!(
            msg,
            format!(r#"config: down.trace: {} line 3: expected a non-negative integer millisecond timestamp, got "bad""#, dir.display())
        );
        std::fs::write(&dir, "1\n2\n4\n").unwrap();
        let c = parse_config_str(&format!(r#"{{"down": {{"trace": "{}"}}}}"#, dir.display())).unwrap();
        assert_eq!(c.down.unwrap().trace.unwrap().opps_ms.len(), 3);
        assert!(e(&format!(r#"{{"down": {{"trace": "{}", "rate_mbit": 5}}}}"#, dir.display())).contains("cannot be combined with rate_mbit"));
        let _ = std::fs::remove_file(&dir);
    }
}

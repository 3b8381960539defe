"""The link watch of a trial (run/session.py): stopping it never raises, whenever a Ctrl-C came."""

from quicbench.run.session import _LinkWatch


def test_a_watch_stopped_before_its_thread_ran_does_not_raise():
    """SIGINT inside start() (the thread object made, not yet started): stop() must not raise
    "cannot join thread before it is started", which would replace the KeyboardInterrupt."""
    import threading
    watch = _LinkWatch(lab=None)
    watch.stop()                                        # never started
    watch.thread = threading.Thread(target=lambda: None)  # made, interrupted before start()
    watch.stop()
    assert watch.done.is_set()


def test_a_started_watch_ends_when_stopped():
    class QuietLab:
        def link_fault(self):
            return None

        def node_fault(self):
            return None
    watch = _LinkWatch(QuietLab())
    watch.start()
    watch.stop()
    assert not watch.thread.is_alive()


def test_a_trials_internal_error_names_the_exception_and_where_it_was_raised():
    """A bug while reading one trial's results fails that trial with this reason (the sweep goes on)."""
    from quicbench.run.session import internal_error
    try:
        {}["acks_sent"]
    except KeyError as e:
        reason = internal_error(e)
    assert reason.startswith("quicbench internal error at test_session_watch.py:")
    assert "KeyError: 'acks_sent'" in reason and reason.endswith("(a bug: please report it)")

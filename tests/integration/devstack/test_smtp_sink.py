"""The SMTP sink the alert tests rely on is a real SMTP server: smtplib delivers to it over TCP."""

import smtplib
from email.message import EmailMessage

from devstack.smtp import SmtpSink, read_maildir


def _send(port: int, subject: str) -> None:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "a@localhost", "b@localhost", subject
    msg.set_content("body")
    with smtplib.SMTP("127.0.0.1", port) as s:
        s.send_message(msg)


def test_sink_receives_over_smtp_and_keeps_a_maildir(tmp_path):
    sink = SmtpSink(maildir=tmp_path).start()
    try:
        _send(sink.port, "[Skiff] x.y failed: OOMKilled")
        got = sink.wait_for(lambda m: "OOMKilled" in m["Subject"], timeout=10)
        assert got["To"] == "b@localhost"
        assert [m["Subject"] for m in read_maildir(tmp_path)] == ["[Skiff] x.y failed: OOMKilled"]
    finally:
        sink.stop()


def test_wait_for_names_what_arrived_when_nothing_matches(smtp_sink):
    _send(smtp_sink.port, "something else")
    try:
        smtp_sink.wait_for(lambda m: "never" in m["Subject"], timeout=1)
    except TimeoutError as e:
        assert "something else" in str(e)
    else:
        raise AssertionError("wait_for returned without a matching message")

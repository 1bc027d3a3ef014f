//! The SMTP provider profile (`[provider] api = "smtp"`): the harness's
//! provider as a mail server on 127.0.0.1, for a service that sends mail
//! through an SMTP client rather than POSTing effects.
//!
//! An effect is a message accepted after `DATA`. Each message goes through
//! the same provider dispatch as an HTTP `POST /effects/{tool}`, so the
//! ledger, the faults, the nemesis and the checks stay one code path; only
//! the answer is said in SMTP:
//!
//! | the provider's answer | SMTP |
//! |---|---|
//! | committed (`201`) | `250 2.0.0 Ok: queued as rcpt-N` |
//! | lost after the commit (`lose-response`, `crash-target` after-commit) | the connection is closed before the `250` (at once, or after the hold): the classic duplicate mail |
//! | `provider-error` (`500`) | `451 4.3.0`, a temporary failure (`committed = true`: accepted first, as a server that fails after queueing) |
//! | `delay` at `provider-to-target` | the reply to the end of `DATA` comes late (a slow `DATA`) |
//! | a decline (`402`) | `550 5.7.1` |
//!
//! SMTP has no idempotency key and nobody can ask a mail server what it
//! accepted: the profile is blind by nature, and a scenario whose provider
//! is keyed or can be looked up is not admitted (`admit`). The
//! `Message-ID` is recorded as the dispatch's key, for the report; the
//! server does not deduplicate on it.
//!
//! Attribution: the header `X-` + the subject field (`X-Invoice`) when
//! present, else the longest of the trial's subjects found in the
//! `Subject:` header. Payload: a message that carries one of the argument
//! sets the agent sent for that subject (each string argument found among
//! the recipients or in the subject and the text, whitespace normalised) is
//! fingerprinted as those arguments, so the payload checks compare like with
//! like; any other message is fingerprinted by its recipients, subject and
//! normalised text, and reads as another payload.
//!
//! The protocol is hand-written (EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP,
//! QUIT): the harness must own every byte around the reply to `DATA` (close
//! instead of `250`, hold it, answer `451`), and the subset is a hundred
//! lines; see docs/dependencies.md.

use std::sync::Arc;

use chaos_kit::http::{Request, Response};
use chaos_kit::protocol::{LookupCapability, ProviderProfile, IDEMPOTENCY_KEY};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::{Answer, Answering, Api, Desk, FileFacts, Sent};
use crate::scenario::Scenario;

pub(super) const NAME: &str = "smtp";

pub(super) struct Smtp;

/// A command line longer than this is refused (RFC 5321 allows 512 octets).
const MAX_LINE: usize = 4096;
/// A message larger than this is refused after `DATA` (`552`): the same
/// bound as every other body chaos reads (docs/target-protocol.md §4.1).
const MAX_MESSAGE: usize = chaos_kit::http::MAX_BODY_BYTES;
const MAX_RECIPIENTS: usize = 100;

impl Api for Smtp {
    fn doc(&self) -> &'static str {
        "a mail server on 127.0.0.1: an effect is a message accepted after DATA (blind scenarios only)"
    }

    fn scheme(&self) -> &'static str {
        "smtp"
    }

    fn blind_only(&self) -> bool {
        true
    }

    fn validate(&self, file: &FileFacts) -> Result<(), String> {
        if file.effects_in_database {
            // A mail server counts messages; rows in the target's database
            // are another boundary, counted by [effects].
            return Err("[provider] api = \"smtp\" counts the messages a mail server accepts, and [effects] counts rows in the target's database; keep one of the two".into());
        }
        Ok(())
    }

    /// SMTP neither deduplicates nor answers lookups, so only a `blind`
    /// provider with no lookup is honest.
    fn admit(&self, scenario: &Scenario, target: &str) -> Result<(), String> {
        let provider = &scenario.provider;
        if provider.profile != ProviderProfile::Blind {
            Err(format!(
                "target '{target}' sends mail over SMTP ([provider] api = \"smtp\"), and the scenario's provider is '{}'; a mail server deduplicates nothing, so only scenarios with [provider] profile = \"blind\" can be run against it (e.g. scenarios/smtp/*.toml, scenarios/*-blind*.toml)",
                provider.profile.as_str()
            ))
        } else if provider.lookup != LookupCapability::None {
            Err(format!(
                "target '{target}' sends mail over SMTP ([provider] api = \"smtp\"), and the scenario's provider can be looked up (lookup = \"{}\"); nobody can ask a mail server what it accepted: use lookup = \"none\"",
                provider.lookup.as_str()
            ))
        } else {
            Ok(())
        }
    }

    /// A message is handed to the core as chaos's own `POST /effects/{tool}`.
    fn route(&self, desk: Arc<dyn Desk>, request: Request) -> Option<Answering<'static>> {
        super::chaos::effects_post(desk, request)
    }

    /// The mail server reads chaos's answer and says it in SMTP.
    fn answer(&self, desk: &dyn Desk, answer: Answer, key: Option<&str>) -> Response {
        super::chaos::Chaos.answer(desk, answer, key)
    }

    /// Serves SMTP on `listener` (the slot's provider port, the same for a
    /// process kept from an earlier trial) until `stopped` ends.
    fn serve(
        &self,
        listener: tokio::net::TcpListener,
        desk: Arc<dyn Desk>,
        sent: Sent,
        mut stopped: watch::Receiver<()>,
    ) {
        let attribution = Arc::new(Attribution::of(sent));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        tokio::spawn(session(stream, desk.clone(), attribution.clone()));
                    }
                    changed = stopped.changed() => {
                        if changed.is_err() {
                            break;
                        }
                    }
                }
            }
        });
    }
}

/// What the server needs of the trial to attribute a message: the tool it
/// stands for, the subject field, and every argument set the agent sends.
#[derive(Debug, Clone)]
pub(crate) struct Attribution {
    tool: String,
    subject_field: String,
    free_text_field: Option<String>,
    /// Longest first, so `inv-10` is not found inside `inv-1`'s place.
    subjects: Vec<String>,
    /// (subject, arguments) of every payload the trial sends.
    payloads: Vec<(String, Map<String, Value>)>,
}

impl Attribution {
    pub(crate) fn of(sent: Sent) -> Attribution {
        let mut subjects = sent.subjects;
        subjects.sort_by_key(|subject| std::cmp::Reverse(subject.len()));
        subjects.dedup();
        let payloads = sent
            .payloads
            .into_iter()
            .filter_map(|(subject, bytes)| {
                let arguments = serde_json::from_slice::<Map<String, Value>>(&bytes).ok()?;
                Some((subject, arguments))
            })
            .collect();
        Attribution {
            tool: sent.tool,
            subject_field: sent.subject_field,
            free_text_field: sent.free_text_field,
            subjects,
            payloads,
        }
    }

    /// The dispatch a message stands for: `POST /effects/{tool}` with the
    /// Message-ID as its key and the body the provider attributes.
    fn dispatch(&self, message: &Message) -> Request {
        let mail = Mail::parse(&message.data);
        let subject = mail
            .header(&format!("x-{}", self.subject_field))
            .map(|value| value.trim().to_owned())
            .or_else(|| {
                let line = mail.header("subject")?;
                self.subjects
                    .iter()
                    .find(|subject| line.contains(subject.as_str()))
                    .cloned()
            });
        let text = normalise(&format!(
            "{} {}",
            mail.header("subject").unwrap_or_default(),
            mail.text()
        ));
        let recipients: Vec<String> = message
            .recipients
            .iter()
            .map(|to| to.to_ascii_lowercase())
            .collect();
        let carried = subject.as_ref().and_then(|subject| {
            self.payloads
                .iter()
                .filter(|(of, _)| of == subject)
                .map(|(_, arguments)| arguments)
                .filter(|arguments| self.carries(arguments, &recipients, &text))
                // The most specific: the one whose words cover the most of it.
                .max_by_key(|arguments| words(arguments))
        });
        let body = match carried {
            Some(arguments) => Value::Object(arguments.clone()),
            None => {
                let mut body = Map::new();
                if let Some(subject) = &subject {
                    body.insert(self.subject_field.clone(), subject.clone().into());
                }
                body.insert("recipient".into(), recipients.join(", ").into());
                body.insert(
                    "subject".into(),
                    normalise(mail.header("subject").unwrap_or_default()).into(),
                );
                let free_text = self.free_text_field.as_deref().unwrap_or("body");
                body.insert(free_text.into(), normalise(&mail.text()).into());
                Value::Object(body)
            }
        };
        let mut request = Request::post(format!("/effects/{}", self.tool), body.to_string());
        if let Some(id) = mail.header("message-id") {
            request = request.header(IDEMPOTENCY_KEY, id.trim());
        }
        request
    }

    /// Whether every string argument but the subject is in the message:
    /// among its recipients, or in its subject and text.
    fn carries(&self, arguments: &Map<String, Value>, recipients: &[String], text: &str) -> bool {
        arguments
            .iter()
            .filter(|(name, _)| **name != self.subject_field)
            .filter_map(|(_, value)| value.as_str())
            .all(|value| {
                let value = normalise(value);
                recipients.contains(&value.to_ascii_lowercase()) || text.contains(&value)
            })
    }
}

fn words(arguments: &Map<String, Value>) -> usize {
    arguments
        .values()
        .filter_map(Value::as_str)
        .map(str::len)
        .sum()
}

/// Runs of whitespace as one space, trimmed: line wrapping is the mail's.
fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One message as the envelope and `DATA` gave it.
#[derive(Debug, Clone, Default)]
struct Message {
    recipients: Vec<String>,
    data: Vec<u8>,
}

/// The parts of a message the attribution reads: unfolded headers and the
/// text (quoted-printable or base64 decoded; other encodings as they are).
struct Mail {
    headers: Vec<(String, String)>,
    body: String,
}

impl Mail {
    fn parse(data: &[u8]) -> Mail {
        let text = String::from_utf8_lossy(data).replace("\r\n", "\n");
        let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
        let mut headers: Vec<(String, String)> = Vec::new();
        for line in head.lines() {
            if line.starts_with([' ', '\t']) {
                if let Some((_, value)) = headers.last_mut() {
                    value.push(' ');
                    value.push_str(line.trim());
                }
            } else if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
            }
        }
        Mail {
            headers,
            body: body.to_owned(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(found, _)| found.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    fn text(&self) -> String {
        let encoding = self.header("content-transfer-encoding").unwrap_or("");
        if encoding.eq_ignore_ascii_case("quoted-printable") {
            decode_quoted_printable(&self.body)
        } else if encoding.eq_ignore_ascii_case("base64") {
            // Python's MIMEText(text, "plain", "utf-8") sends base64
            // (mcp-email-server): undecoded, its text carries no argument.
            decode_base64(&self.body)
        } else {
            self.body.clone()
        }
    }
}

/// RFC 2045 quoted-printable: `=XX` octets and `=` soft line breaks.
fn decode_quoted_printable(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'=' if bytes.get(at + 1) == Some(&b'\n') => at += 2,
            b'=' if at + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[at + 1..at + 3])
                    .ok()
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok());
                match hex {
                    Some(byte) => {
                        out.push(byte);
                        at += 3;
                    }
                    None => {
                        out.push(b'=');
                        at += 1;
                    }
                }
            }
            byte => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// RFC 2045 base64: characters outside the alphabet (line breaks) are
/// skipped, as §6.8 says, and the text ends at the first `=`.
fn decode_base64(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut bits, mut held) = (0u32, 0u32);
    for byte in text.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => continue,
        };
        bits = (bits << 6) | u32::from(value);
        held += 6;
        if held >= 8 {
            held -= 8;
            out.push((bits >> held) as u8);
            bits &= (1 << held) - 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a session is in its mail transaction.
#[derive(Default)]
struct Transaction {
    greeted: bool,
    from: Option<String>,
    recipients: Vec<String>,
}

/// How a line is read: a line, the end of the connection, or a line too long.
enum Line {
    Text(Vec<u8>),
    Closed,
    TooLong,
}

async fn read_line(reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> Line {
    let mut line = Vec::new();
    loop {
        let buffer = match reader.fill_buf().await {
            Ok([]) => return Line::Closed,
            Ok(buffer) => buffer,
            Err(_) => return Line::Closed,
        };
        let (taken, done) = match buffer.iter().position(|byte| *byte == b'\n') {
            Some(end) => (end + 1, true),
            None => (buffer.len(), false),
        };
        if line.len() < MAX_LINE {
            line.extend_from_slice(&buffer[..taken.min(MAX_LINE - line.len())]);
        }
        let over = line.len() >= MAX_LINE;
        reader.consume(taken);
        if done {
            if over {
                return Line::TooLong;
            }
            while matches!(line.last(), Some(b'\n' | b'\r')) {
                line.pop();
            }
            return Line::Text(line);
        }
    }
}

/// One client connection, from the greeting to `QUIT` or a dropped reply.
async fn session(stream: TcpStream, provider: Arc<dyn Desk>, attribution: Arc<Attribution>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut transaction = Transaction::default();
    if reply(&mut write, "220 127.0.0.1 chaos SMTP provider ready")
        .await
        .is_err()
    {
        return;
    }
    loop {
        let line = match read_line(&mut reader).await {
            Line::Text(line) => line,
            Line::Closed => return,
            Line::TooLong => {
                if reply(&mut write, "500 5.5.2 line too long").await.is_err() {
                    return;
                }
                continue;
            }
        };
        let line = String::from_utf8_lossy(&line).into_owned();
        let (verb, rest) = line.split_once(' ').unwrap_or((&line, ""));
        let answer = match verb.to_ascii_uppercase().as_str() {
            "EHLO" => {
                transaction = Transaction {
                    greeted: true,
                    ..Transaction::default()
                };
                format!("250-127.0.0.1 greets {}\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250-AUTH PLAIN\r\n250 SIZE {MAX_MESSAGE}", rest.trim())
            }
            "HELO" => {
                transaction = Transaction {
                    greeted: true,
                    ..Transaction::default()
                };
                "250 127.0.0.1".into()
            }
            "MAIL" if !transaction.greeted => "503 5.5.1 EHLO or HELO first".into(),
            "MAIL" if transaction.from.is_some() => {
                "503 5.5.1 a transaction is open; RSET first".into()
            }
            "MAIL" => match address(rest, "FROM:") {
                Some(from) => {
                    transaction.from = Some(from);
                    "250 2.1.0 Ok".into()
                }
                None => "501 5.5.4 syntax: MAIL FROM:<address>".into(),
            },
            "RCPT" if transaction.from.is_none() => "503 5.5.1 MAIL first".into(),
            "RCPT" if transaction.recipients.len() >= MAX_RECIPIENTS => {
                "452 4.5.3 too many recipients".into()
            }
            "RCPT" => match address(rest, "TO:") {
                Some(to) if !to.is_empty() => {
                    transaction.recipients.push(to);
                    "250 2.1.5 Ok".into()
                }
                _ => "501 5.5.4 syntax: RCPT TO:<address>".into(),
            },
            "DATA" if transaction.recipients.is_empty() => "503 5.5.1 RCPT first".into(),
            "DATA" => {
                if reply(&mut write, "354 End data with <CR><LF>.<CR><LF>")
                    .await
                    .is_err()
                {
                    return;
                }
                let Some(data) = read_data(&mut reader).await else {
                    return;
                };
                let recipients = std::mem::take(&mut transaction.recipients);
                transaction.from = None;
                match data {
                    Data::TooLarge => "552 5.3.4 message too large".into(),
                    Data::Message(data) => {
                        let message = Message { recipients, data };
                        match deliver(&provider, &attribution, &message).await {
                            Some(answer) => answer,
                            // The message may be accepted; its 250 never arrives.
                            None => return,
                        }
                    }
                }
            }
            "RSET" => {
                transaction.from = None;
                transaction.recipients.clear();
                "250 2.0.0 Ok".into()
            }
            "NOOP" => "250 2.0.0 Ok".into(),
            "VRFY" => "252 2.1.5 cannot verify, send and see".into(),
            "QUIT" => {
                let _ = reply(&mut write, "221 2.0.0 Bye").await;
                return;
            }
            "AUTH" if !transaction.greeted => "503 5.5.1 EHLO first".into(),
            "AUTH" => match auth(rest) {
                Auth::Answer(answer) => answer.into(),
                Auth::Challenge => {
                    // `AUTH PLAIN` with no initial response: ask for it.
                    if reply(&mut write, "334 ").await.is_err() {
                        return;
                    }
                    match read_line(&mut reader).await {
                        Line::Text(line) => auth_response(&line).into(),
                        Line::Closed => return,
                        Line::TooLong => "500 5.5.2 line too long".into(),
                    }
                }
            },
            "STARTTLS" | "BDAT" | "ETRN" | "EXPN" | "HELP" => "502 5.5.1 not implemented".into(),
            _ => "500 5.5.2 unrecognised command".into(),
        };
        if reply(&mut write, &answer).await.is_err() {
            return;
        }
    }
}

/// How an `AUTH` command is answered.
enum Auth {
    Answer(&'static str),
    /// `334`, then the client's response on the next line.
    Challenge,
}

/// `AUTH PLAIN` (RFC 4954, RFC 4616), any credentials: chaos stands in for
/// the mail server, whose login is not what is under test, and a sender
/// that always logs in (mcp-email-server) must reach `DATA` to be tested.
/// The one mechanism offered, over the plain connection, as a local relay
/// would; TLS is not offered, so a sender configured for it fails at once.
fn auth(rest: &str) -> Auth {
    let mut words = rest.split_whitespace();
    let mechanism = words.next().unwrap_or("");
    if !mechanism.eq_ignore_ascii_case("PLAIN") {
        return Auth::Answer("504 5.5.4 mechanism not supported; AUTH PLAIN is");
    }
    match words.next() {
        None => Auth::Challenge,
        Some(initial) => Auth::Answer(auth_response(initial.as_bytes())),
    }
}

/// The answer to a PLAIN response: `*` cancels (RFC 4954 §4), an empty one
/// carries no credentials, any other is taken.
fn auth_response(response: &[u8]) -> &'static str {
    match response.trim_ascii() {
        b"*" => "501 5.7.0 authentication cancelled",
        b"" | b"=" => "535 5.7.8 no credentials given",
        _ => "235 2.7.0 Authentication successful",
    }
}

/// `<address>` after `prefix` (`FROM:`, `TO:`), parameters after it ignored.
fn address(rest: &str, prefix: &str) -> Option<String> {
    let rest = rest.trim_start();
    let head = rest.get(..prefix.len())?;
    if !head.eq_ignore_ascii_case(prefix) {
        return None;
    }
    let rest = rest[prefix.len()..].trim_start();
    let inner = rest.strip_prefix('<')?;
    let end = inner.find('>')?;
    Some(inner[..end].trim().to_owned())
}

enum Data {
    Message(Vec<u8>),
    TooLarge,
}

/// The lines after `354` up to the lone `.`, dot-unstuffed; `None` when the
/// client went away first.
async fn read_data(reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> Option<Data> {
    let mut data = Vec::new();
    let mut too_large = false;
    loop {
        let mut line = Vec::new();
        let read = (&mut *reader)
            .take(MAX_LINE as u64 * 16)
            .read_until(b'\n', &mut line)
            .await
            .ok()?;
        if read == 0 {
            return None;
        }
        let content = line
            .strip_suffix(b"\r\n")
            .or_else(|| line.strip_suffix(b"\n"))
            .unwrap_or(&line);
        if content == b"." {
            return Some(if too_large {
                Data::TooLarge
            } else {
                Data::Message(data)
            });
        }
        let content = content.strip_prefix(b".").unwrap_or(content);
        if data.len() + content.len() + 2 > MAX_MESSAGE {
            too_large = true;
        }
        if !too_large {
            data.extend_from_slice(content);
            data.extend_from_slice(b"\r\n");
        }
    }
}

/// Hands the message to the provider as a dispatch and says its answer in
/// SMTP; `None` when the provider's answer is lost: the connection closes
/// with no reply.
async fn deliver(
    provider: &Arc<dyn Desk>,
    attribution: &Attribution,
    message: &Message,
) -> Option<String> {
    let request = attribution.dispatch(message);
    let response = provider.clone().handle(request).await.ok()?;
    Some(smtp_answer(&response))
}

fn smtp_answer(response: &Response) -> String {
    match response.status {
        200 | 201 => {
            let receipt = serde_json::from_slice::<Value>(&response.body)
                .ok()
                .and_then(|body| body.get("receipt")?.as_str().map(str::to_owned))
                .unwrap_or_default();
            format!("250 2.0.0 Ok: queued as {receipt}")
        }
        500..=599 => "451 4.3.0 temporary failure, try again later".into(),
        402 => "550 5.7.1 message refused".into(),
        status => format!("554 5.6.0 message refused (provider status {status})"),
    }
}

async fn reply(write: &mut tokio::net::tcp::OwnedWriteHalf, line: &str) -> std::io::Result<()> {
    write.write_all(line.as_bytes()).await?;
    write.write_all(b"\r\n").await?;
    write.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_read_from_their_angle_brackets() {
        assert_eq!(
            address(" FROM:<a@b.example> SIZE=12", "FROM:"),
            Some("a@b.example".into())
        );
        assert_eq!(
            address("to: <c@d.example>", "TO:"),
            Some("c@d.example".into())
        );
        assert_eq!(address("TO:c@d.example", "TO:"), None);
        assert_eq!(address("FROM:<a", "FROM:"), None);
    }

    // guards: a sender that always logs in (mcp-email-server's aiosmtplib
    // client) must get past AUTH to reach DATA, and a cancel is no login
    #[test]
    fn auth_plain_takes_any_credentials_and_nothing_else() {
        let answer = |rest: &str| match auth(rest) {
            Auth::Answer(answer) => answer,
            Auth::Challenge => "334",
        };
        // "\0user\0secret", base64.
        assert_eq!(
            answer("PLAIN AHVzZXIAc2VjcmV0"),
            "235 2.7.0 Authentication successful"
        );
        assert_eq!(answer("plain"), "334");
        assert!(answer("LOGIN").starts_with("504"));
        assert!(answer("CRAM-MD5").starts_with("504"));
        assert!(answer("PLAIN =").starts_with("535"));
        assert!(auth_response(b"*").starts_with("501"));
        assert!(auth_response(b"AHVzZXIAc2VjcmV0\r").starts_with("235"));
    }

    #[test]
    fn quoted_printable_text_is_decoded_and_unwrapped() {
        assert_eq!(
            decode_quoted_printable("Invoice inv-1 is =\nover=64ue =3D late.\n"),
            "Invoice inv-1 is overdue = late.\n"
        );
        // A stray '=' at the end or before non-hex stays as written.
        assert_eq!(decode_quoted_printable("a=zz="), "a=zz=");
    }

    // guards: a base64 body (Python's MIMEText with utf-8) must be read as
    // its text, or a message carrying the agent's arguments reads as another
    // payload (replay-for-changed-payload on every send)
    #[test]
    fn base64_text_is_decoded_across_its_line_breaks() {
        // "Invoice inv-1 is overdue. \u{2713}", base64, wrapped.
        assert_eq!(
            decode_base64("SW52b2ljZSBpbnYtMSBp\r\ncyBvdmVyZHVlLiDinJM=\r\n"),
            "Invoice inv-1 is overdue. \u{2713}"
        );
        assert_eq!(decode_base64("YQ=="), "a");
        assert_eq!(decode_base64(""), "");
        let mail = Mail::parse(
            b"Content-Transfer-Encoding: base64\r\n\r\nSW52b2ljZSBpbnYtMSBpcyBvdmVyZHVlLg==\r\n",
        );
        assert_eq!(mail.text(), "Invoice inv-1 is overdue.");
    }

    fn attribution() -> Attribution {
        let arguments = |invoice: &str, recipient: &str| {
            serde_json::json!({
                "invoice": invoice,
                "recipient": recipient,
                "amount_cents": 4999,
                "message": format!("Invoice {invoice} is overdue."),
            })
            .as_object()
            .cloned()
            .unwrap()
        };
        Attribution {
            tool: "send_reminder".into(),
            subject_field: "invoice".into(),
            free_text_field: None,
            subjects: vec!["inv-10".into(), "inv-1".into()],
            payloads: vec![
                ("inv-1".into(), arguments("inv-1", "billing@a.example")),
                ("inv-1".into(), arguments("inv-1", "collections@a.example")),
                ("inv-10".into(), arguments("inv-10", "billing@a.example")),
            ],
        }
    }

    fn message(to: &str, headers: &str, text: &str) -> Message {
        Message {
            recipients: vec![to.into()],
            data: format!("{headers}Message-ID: <m-1@x>\r\n\r\n{text}\r\n").into_bytes(),
        }
    }

    fn body(request: &Request) -> Value {
        serde_json::from_slice(&request.body).unwrap()
    }

    // guards: a message must count as a dispatch of the arguments it
    // carries, or every retry after a lost 250 reads as a changed payload
    #[test]
    fn a_message_that_carries_the_arguments_is_a_dispatch_of_them() {
        let attribution = attribution();
        let request = attribution.dispatch(&message(
            "Billing@A.example",
            "X-Invoice: inv-1\r\nSubject: Reminder\r\n",
            "Invoice inv-1\r\n  is overdue.",
        ));
        assert_eq!(request.path, "/effects/send_reminder");
        assert_eq!(request.header_value(IDEMPOTENCY_KEY), Some("<m-1@x>"));
        assert_eq!(
            body(&request),
            Value::Object(attribution.payloads[0].1.clone())
        );
        // Another recipient is the other argument set the agent sent.
        let request = attribution.dispatch(&message(
            "collections@a.example",
            "X-Invoice: inv-1\r\n",
            "Invoice inv-1 is overdue.",
        ));
        assert_eq!(body(&request)["recipient"], "collections@a.example");
    }

    #[test]
    fn without_the_header_the_subject_line_names_the_longest_subject_found() {
        let request = attribution().dispatch(&message(
            "billing@a.example",
            "Subject: Reminder: invoice inv-10 is overdue\r\n",
            "Invoice inv-10 is overdue.",
        ));
        assert_eq!(body(&request)["invoice"], "inv-10");
        assert_eq!(body(&request)["amount_cents"], 4999);
    }

    #[test]
    fn a_message_no_argument_set_accounts_for_is_fingerprinted_as_written() {
        let request = attribution().dispatch(&message(
            "someone@else.example",
            "Subject: Reminder: invoice inv-1 is overdue\r\n",
            "Pay   now.",
        ));
        let written = body(&request);
        assert_eq!(written["invoice"], "inv-1");
        assert_eq!(written["recipient"], "someone@else.example");
        assert_eq!(written["subject"], "Reminder: invoice inv-1 is overdue");
        assert_eq!(written["body"], "Pay now.");
        let unattributed =
            attribution().dispatch(&message("billing@a.example", "Subject: hello\r\n", "hi"));
        assert!(body(&unattributed).get("invoice").is_none());
    }

    #[test]
    fn the_providers_answers_are_said_in_smtp() {
        let committed = Response::json(201, &serde_json::json!({"receipt": "rcpt-4"}));
        assert_eq!(smtp_answer(&committed), "250 2.0.0 Ok: queued as rcpt-4");
        assert!(smtp_answer(&Response::new(500)).starts_with("451 4.3.0"));
        assert!(smtp_answer(&Response::new(402)).starts_with("550 5.7.1"));
        assert!(smtp_answer(&Response::new(400)).starts_with("554"));
    }

    #[test]
    fn headers_are_unfolded_and_case_blind() {
        let mail = Mail::parse(
            b"Subject: Reminder: invoice\r\n inv-7 is overdue\r\nX-Invoice: inv-7\r\n\r\nbody\r\n",
        );
        assert_eq!(
            mail.header("SUBJECT"),
            Some("Reminder: invoice inv-7 is overdue")
        );
        assert_eq!(mail.header("x-invoice"), Some("inv-7"));
        assert_eq!(mail.text(), "body\n");
    }
}

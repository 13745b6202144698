//! A py4j 0.10 client: the text protocol the ScienceWorld jar's gateway speaks.
//!
//! One command per request, each line `\n`-terminated, ending with `e\n`:
//! - call: `c`, target object id, method, arguments, `e`;
//! - construct: `i`, fully qualified class name, arguments, `e`;
//! - release: `m`, `d`, object id, `e`.
//!
//! Arguments: `s<str>` (backslash, CR and LF escaped as `\\`, `\r`, `\n`), `i<int>`, `L<long>`,
//! `d<double>`, `b<true|false>`, `n` (null). The reply is one line: `!y` + a value (`v` void,
//! `s` string, `i`, `L`, `d`, `b`, `n`, `ro<N>` object, `lo<N>` list) or `!x` + an exception.
//! Lists come back as references: read them with `size`/`get`, then release them.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::error::{EnvError, Result};

/// One argument of a call.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Str(&'a str),
    Int(i32),
    Bool(bool),
    /// A reference to a gateway object (`o<N>`).
    Ref(&'a str),
}

/// A decoded reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Void,
    Null,
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    /// An object reference (`o<N>`).
    Object(String),
    /// A `java.util.List` reference (`o<N>`).
    List(String),
}

/// One TCP connection to a gateway. Not `Clone`: py4j answers requests in order per connection.
#[derive(Debug)]
pub struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    /// Set when a call failed half-way: the stream is out of sync and must not be reused.
    poisoned: bool,
}

impl Connection {
    pub fn connect(port: u16, timeout: Duration) -> Result<Self> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            poisoned: false,
        })
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Calls `target.method(args)`.
    pub fn call(
        &mut self,
        target: &str,
        method: &str,
        args: &[Arg<'_>],
        timeout: Duration,
    ) -> Result<Value> {
        let mut cmd = format!("c\n{target}\n{method}\n");
        encode_args(&mut cmd, args);
        cmd.push_str("e\n");
        self.roundtrip(&cmd, || format!("{method}({args:?})"), timeout)
    }

    /// `new class()`; returns the object id.
    pub fn construct(&mut self, class: &str, timeout: Duration) -> Result<String> {
        let cmd = format!("i\n{class}\ne\n");
        match self.roundtrip(&cmd, || format!("new {class}()"), timeout)? {
            Value::Object(id) => Ok(id),
            other => Err(EnvError::Protocol(format!(
                "new {class}() returned {other:?}"
            ))),
        }
    }

    /// Reads a `java.util.List` reference element by element (`size`, then `get` per
    /// element) and releases it.
    pub fn list(&mut self, list: &str, timeout: Duration) -> Result<Vec<Value>> {
        let n = match self.call(list, "size", &[], timeout)? {
            Value::Int(n) => n,
            other => {
                return Err(EnvError::Protocol(format!(
                    "List.size() returned {other:?}"
                )));
            }
        };
        let mut out = Vec::with_capacity(n.max(0) as usize);
        for k in 0..n {
            out.push(self.call(list, "get", &[Arg::Int(k as i32)], timeout)?);
        }
        self.release(list, timeout)?;
        Ok(out)
    }

    /// Reads a `List<String>` reference element by element and releases it.
    pub fn string_list(&mut self, list: &str, timeout: Duration) -> Result<Vec<String>> {
        self.list(list, timeout)?
            .into_iter()
            .enumerate()
            .map(|(k, v)| match v {
                Value::Str(s) => Ok(s),
                other => Err(EnvError::Protocol(format!(
                    "List.get({k}) returned {other:?}, expected a string"
                ))),
            })
            .collect()
    }

    /// Reads a `List<String>` reference in three round trips — `size`, then
    /// `String.join("\n", list)` as a static call — and releases it. Falls back to
    /// [`Connection::string_list`] if an element contains a newline (the counts disagree).
    pub fn string_list_joined(&mut self, list: &str, timeout: Duration) -> Result<Vec<String>> {
        let n = match self.call(list, "size", &[], timeout)? {
            Value::Int(n) => n.max(0) as usize,
            other => {
                return Err(EnvError::Protocol(format!(
                    "List.size() returned {other:?}"
                )));
            }
        };
        let joined = match self.call(
            "z:java.lang.String",
            "join",
            &[Arg::Str("\n"), Arg::Ref(list)],
            timeout,
        )? {
            Value::Str(s) => s,
            other => {
                return Err(EnvError::Protocol(format!(
                    "String.join returned {other:?}"
                )));
            }
        };
        let items: Vec<String> = if n == 0 {
            Vec::new()
        } else {
            joined.split('\n').map(str::to_owned).collect()
        };
        if items.len() != n {
            return self.string_list(list, timeout);
        }
        self.release(list, timeout)?;
        Ok(items)
    }

    /// Lets the gateway garbage-collect an object.
    pub fn release(&mut self, object: &str, timeout: Duration) -> Result<()> {
        let cmd = format!("m\nd\n{object}\ne\n");
        self.roundtrip(&cmd, || format!("release {object}"), timeout)
            .map(|_| ())
    }

    fn roundtrip(
        &mut self,
        cmd: &str,
        what: impl Fn() -> String,
        timeout: Duration,
    ) -> Result<Value> {
        if self.poisoned {
            return Err(EnvError::Crashed(
                "connection lost by an earlier failed call".into(),
            ));
        }
        let started = Instant::now();
        let result = self.roundtrip_inner(cmd, timeout);
        match result {
            Ok(line) => {
                // An exception thrown by the method comes back as a reference: ask it for
                // its text (one more round trip) so the error says what happened.
                if let Some(obj) = line.strip_prefix("!xr") {
                    let obj = obj.to_owned();
                    let text =
                        match self.roundtrip_inner(&format!("c\n{obj}\ntoString\ne\n"), timeout) {
                            Ok(reply) => match decode_reply(&reply) {
                                Ok(Value::Str(s)) => s,
                                _ => obj.clone(),
                            },
                            Err(_) => obj.clone(),
                        };
                    let _ = self.roundtrip_inner(&format!("m\nd\n{obj}\ne\n"), timeout);
                    return Err(EnvError::Protocol(format!(
                        "{}: Java exception: {}",
                        what(),
                        truncate(&text, 500)
                    )));
                }
                decode_reply(&line).map_err(|e| match e {
                    EnvError::Protocol(m) => EnvError::Protocol(format!("{}: {m}", what())),
                    other => other,
                })
            }
            Err(e) => {
                self.poisoned = true;
                Err(match e.kind() {
                    ErrorKind::WouldBlock | ErrorKind::TimedOut => EnvError::Timeout {
                        call: what(),
                        seconds: started.elapsed().as_secs_f64(),
                    },
                    _ => EnvError::Crashed(format!("{}: {e}", what())),
                })
            }
        }
    }

    fn roundtrip_inner(&mut self, cmd: &str, timeout: Duration) -> std::io::Result<String> {
        self.writer.set_write_timeout(Some(timeout))?;
        self.reader.get_ref().set_read_timeout(Some(timeout))?;
        self.writer.write_all(cmd.as_bytes())?;
        let mut line = String::new();
        let n = self.reader.read_line(&mut line)?;
        if n == 0 || !line.ends_with('\n') {
            return Err(std::io::Error::new(
                ErrorKind::UnexpectedEof,
                "the gateway closed the connection",
            ));
        }
        line.pop();
        Ok(line)
    }
}

fn encode_args(cmd: &mut String, args: &[Arg<'_>]) {
    for a in args {
        match a {
            Arg::Str(s) => {
                cmd.push('s');
                for c in s.chars() {
                    match c {
                        '\\' => cmd.push_str("\\\\"),
                        '\r' => cmd.push_str("\\r"),
                        '\n' => cmd.push_str("\\n"),
                        c => cmd.push(c),
                    }
                }
            }
            Arg::Int(i) => cmd.push_str(&format!("i{i}")),
            Arg::Bool(b) => cmd.push_str(if *b { "btrue" } else { "bfalse" }),
            Arg::Ref(id) => {
                cmd.push('r');
                cmd.push_str(id);
            }
        }
        cmd.push('\n');
    }
}

/// Undoes py4j's string escaping (`\n`, `\r`, `\\`; `\t` accepted too).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// Decodes one reply line (without its newline).
pub fn decode_reply(line: &str) -> Result<Value> {
    let bad = || EnvError::Protocol(format!("unexpected reply {:?}", truncate(line, 200)));
    if let Some(err) = line.strip_prefix("!x") {
        let msg = err
            .strip_prefix('s')
            .map(unescape)
            .unwrap_or_else(|| err.to_owned());
        return Err(EnvError::Protocol(format!(
            "Java exception: {}",
            truncate(msg.lines().next().unwrap_or(""), 500)
        )));
    }
    let v = line.strip_prefix("!y").ok_or_else(bad)?;
    let (tag, rest) = v.split_at(v.chars().next().map_or(0, char::len_utf8));
    Ok(match tag {
        "v" => Value::Void,
        "n" => Value::Null,
        "s" => Value::Str(unescape(rest)),
        "i" | "L" => Value::Int(rest.parse().map_err(|_| bad())?),
        "d" => Value::Double(rest.parse().map_err(|_| bad())?),
        "b" => Value::Bool(match rest {
            "true" => true,
            "false" => false,
            _ => return Err(bad()),
        }),
        "r" => Value::Object(rest.to_owned()),
        "l" => Value::List(rest.to_owned()),
        _ => return Err(bad()),
    })
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_replies_seen_from_the_jar() {
        assert_eq!(decode_reply("!yro0").unwrap(), Value::Object("o0".into()));
        assert_eq!(decode_reply("!ylo12").unwrap(), Value::List("o12".into()));
        assert_eq!(decode_reply("!yd0.25").unwrap(), Value::Double(0.25));
        assert_eq!(decode_reply("!ybfalse").unwrap(), Value::Bool(false));
        assert_eq!(decode_reply("!yi30").unwrap(), Value::Int(30));
        assert_eq!(decode_reply("!ys").unwrap(), Value::Str(String::new()));
        assert_eq!(
            decode_reply("!ysIn it:\\n\tthe agent\\\\x").unwrap(),
            Value::Str("In it:\n\tthe agent\\x".into())
        );
        let err =
            decode_reply("!xspy4j.Py4JException: Method nosuchmethod([]) does not exist\\n\tat x")
                .unwrap_err()
                .to_string();
        assert!(err.contains("nosuchmethod"), "{err}");
        assert!(decode_reply("garbage").is_err());
    }

    #[test]
    fn encodes_strings_escaped() {
        let mut s = String::new();
        encode_args(
            &mut s,
            &[Arg::Str("a\\b\nc\rd\te"), Arg::Int(-3), Arg::Bool(true)],
        );
        assert_eq!(s, "sa\\\\b\\nc\\rd\te\ni-3\nbtrue\n");
    }
}

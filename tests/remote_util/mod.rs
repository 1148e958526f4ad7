//! A small HTTP/1.1 server on 127.0.0.1 for the remote tests: serves objects
//! from memory, honours `Range` (`bytes=a-b`, `bytes=a-`, `bytes=-n`) and
//! `If-Match`, sends an ETag (a CRC of the content), counts requests, and
//! can fail the next requests with 503 (to test retries).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct State {
    pub objects: Mutex<BTreeMap<String, Vec<u8>>>,
    /// Every request line with its Range header (`GET /a.lodt bytes=0-63`).
    pub log: Mutex<Vec<String>>,
    /// Answer this many next requests with 503.
    pub fail_next: AtomicUsize,
    /// Flip a bit of the byte at this offset of the object in this many next
    /// responses that hold it (damage in transit; the object is intact).
    pub damage_next: Mutex<Option<(usize, usize)>>,
    /// Wait this many milliseconds before answering each request (a
    /// stand-in for a WAN's time to the first byte).
    pub delay_ms: AtomicU64,
    /// Requests being answered now, and the most at once so far.
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    stop: AtomicBool,
}

pub struct Server {
    pub state: Arc<State>,
    pub port: u16,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State::default());
        let st = state.clone();
        let handle = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.stop.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    let st = st.clone();
                    std::thread::spawn(move || serve(conn, &st));
                }
            }
        });
        Server {
            state,
            port,
            handle: Some(handle),
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    pub fn put(&self, name: &str, bytes: Vec<u8>) {
        self.state
            .objects
            .lock()
            .unwrap()
            .insert(name.to_owned(), bytes);
    }

    pub fn remove(&self, name: &str) {
        self.state.objects.lock().unwrap().remove(name);
    }

    /// The requests logged so far, then cleared.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.state.log.lock().unwrap())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn etag(bytes: &[u8]) -> String {
    format!("\"{:08x}-{}\"", crc32fast::hash(bytes), bytes.len())
}

fn serve(conn: TcpStream, st: &State) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or("").to_owned(),
            parts.next().unwrap_or("").to_owned(),
        );
        let mut headers = BTreeMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
        let body_len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; body_len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let range = headers.get("range").cloned().unwrap_or_default();
        st.log
            .lock()
            .unwrap()
            .push(format!("{method} {target} {range}").trim_end().to_owned());
        let name = target.trim_start_matches('/').to_owned();
        let now = st.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        st.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let delay = st.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_millis(delay));
        }
        let response = respond(st, &method, &name, &range, headers.get("if-match"));
        st.in_flight.fetch_sub(1, Ordering::SeqCst);
        if out.write_all(&response).is_err() {
            return;
        }
    }
}

fn respond(
    st: &State,
    method: &str,
    name: &str,
    range: &str,
    if_match: Option<&String>,
) -> Vec<u8> {
    let status = |code: &str| -> Vec<u8> {
        format!("HTTP/1.1 {code}\r\nContent-Length: 0\r\n\r\n").into_bytes()
    };
    if st
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return status("503 Service Unavailable");
    }
    let objects = st.objects.lock().unwrap();
    let Some(bytes) = objects.get(name) else {
        return status("404 Not Found");
    };
    let tag = etag(bytes);
    if let Some(m) = if_match
        && m != "*"
        && *m != tag
    {
        return status("412 Precondition Failed");
    }
    let len = bytes.len();
    let (start, end, partial) = match range.strip_prefix("bytes=") {
        None => (0, len, false),
        Some(spec) => {
            let (a, b) = spec.split_once('-').unwrap_or((spec, ""));
            let (s, e) = if a.is_empty() {
                let n: usize = b.parse().unwrap_or(0);
                (len.saturating_sub(n), len)
            } else {
                let s: usize = a.parse().unwrap_or(0);
                let e = if b.is_empty() {
                    len
                } else {
                    (b.parse::<usize>().unwrap_or(0) + 1).min(len)
                };
                (s, e)
            };
            if s >= len || s >= e {
                return format!(
                    "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\nContent-Length: 0\r\n\r\n"
                )
                .into_bytes();
            }
            (s, e, true)
        }
    };
    let mut head = format!(
        "HTTP/1.1 {}\r\nETag: {tag}\r\nLast-Modified: Mon, 23 Nov 2026 00:00:00 GMT\r\nAccept-Ranges: bytes\r\nContent-Length: {}\r\n",
        if partial {
            "206 Partial Content"
        } else {
            "200 OK"
        },
        if method == "HEAD" { len } else { end - start },
    );
    if partial {
        head.push_str(&format!(
            "Content-Range: bytes {start}-{}/{len}\r\n",
            end - 1
        ));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if method != "HEAD" {
        let at = out.len();
        out.extend_from_slice(&bytes[start..end]);
        let mut damage = st.damage_next.lock().unwrap();
        if let Some((offset, times)) = *damage
            && (start..end).contains(&offset)
        {
            out[at + offset - start] ^= 0x10;
            *damage = (times > 1).then(|| (offset, times - 1));
        }
    }
    out
}

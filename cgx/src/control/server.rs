//! The run's side of live control: a thread that accepts requests on the
//! run's socket and hands each to the tracer, which serves it at the stop
//! the control signal causes ([`Requests`]), and sends the reply back.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// How long a request waits for the tracer to serve it (a stopped program,
/// Ctrl-Z, serves none until it goes on).
const SERVE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a client may take to send its request line.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A request waiting for the tracer.
pub struct Request {
    /// The request line, without its end.
    pub line: String,
    reply: Sender<String>,
}

impl Request {
    /// Sends `reply` to the client.
    pub fn answer(self, reply: String) {
        // The client may have given up waiting.
        let _ = self.reply.send(reply);
    }
}

/// The requests a run's server has received and the tracer has not served
/// yet.
#[derive(Clone, Default)]
pub struct Requests(Arc<Mutex<Vec<Request>>>);

impl Requests {
    /// Takes the waiting requests, oldest first.
    pub fn take(&self) -> Vec<Request> {
        match self.0.lock() {
            Ok(mut waiting) => std::mem::take(&mut *waiting),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }

    fn push(&self, request: Request) {
        match self.0.lock() {
            Ok(mut waiting) => waiting.push(request),
            Err(poisoned) => poisoned.into_inner().push(request),
        }
    }
}

/// A run's control socket and the thread serving it; dropping it removes
/// the socket.
pub struct Server {
    socket: PathBuf,
    command: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves requests for the program `pid`, run as `command_line`, in
    /// the control folder; they go to `requests`, and the program's main
    /// thread gets the engine's control signal to have the tracer serve
    /// them.
    pub fn start(pid: i32, command_line: &str, requests: Requests) -> Result<Server> {
        let folder = super::folder();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&folder)
            .with_context(|| format!("cannot make the control folder {}", folder.display()))?;
        let owned = std::fs::metadata(&folder)
            .map(|meta| meta.permissions().mode() & 0o077 == 0)
            .unwrap_or(false);
        if !owned {
            anyhow::bail!(
                "the control folder {} is open to other users",
                folder.display()
            );
        }
        let socket = folder.join(pid.to_string());
        let command = folder.join(format!("{pid}.cmd"));
        // A socket left by an earlier process with this id.
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)
            .with_context(|| format!("cannot listen on {}", socket.display()))?;
        std::fs::write(&command, format!("{command_line}\n"))
            .with_context(|| format!("cannot write {}", command.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("cgx-control".into())
            .spawn(move || serve(&listener, pid, &requests, &stopping))
            .context("cannot start the control thread")?;
        Ok(Server {
            socket,
            command,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the thread in `accept`.
        let _ = UnixStream::connect(&self.socket);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(&self.command);
    }
}

/// Serves the clients of `listener`, one at a time, until `stop`.
fn serve(listener: &UnixListener, pid: i32, requests: &Requests, stop: &AtomicBool) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        // A client that fails goes; the next one is served.
        let _ = serve_client(stream, pid, requests, stop);
    }
}

/// Reads one request from `stream`, has the tracer serve it and writes the
/// reply.
fn serve_client(
    stream: UnixStream,
    pid: i32,
    requests: &Requests,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let line = line.trim_end().to_string();
    let (reply, answer) = channel();
    requests.push(Request { line, reply });
    let signal = cgx_engine::control_signal();
    // SAFETY: tgkill takes plain integers.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, pid, signal) };
    let started = Instant::now();
    let text = loop {
        match answer.recv_timeout(Duration::from_millis(200)) {
            Ok(text) => break text,
            Err(RecvTimeoutError::Timeout) if started.elapsed() < SERVE_TIMEOUT => {
                if stop.load(Ordering::SeqCst) {
                    break "error: the run ended\n".into();
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                break "error: the program did not stop to serve the request (is it stopped?)\n"
                    .into()
            }
            Err(RecvTimeoutError::Disconnected) => break "error: the run ended\n".into(),
        }
    };
    let mut stream = stream;
    stream.write_all(text.as_bytes())
}

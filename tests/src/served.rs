//! Servers a test starts, on 127.0.0.1 and a free port, stopped when the
//! test drops them: a child process that prints its address first (`kvw
//! serve`), or an axum app on a runtime thread of its own.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Longest an in-process app serves, whatever happens to the test that
/// started it: a bound, so a forgotten server never outlives its test run.
pub const APP_LIFETIME: Duration = Duration::from_secs(300);

/// A server process; killed and reaped on drop.
pub struct Process {
    pub child: Child,
    /// The port of the `127.0.0.1:PORT` its first line names.
    pub port: u16,
    /// Its first line on stdout.
    pub line: String,
}

impl Process {
    /// Start `cmd` with stdout piped and read its first line, which must
    /// name `127.0.0.1:PORT`.
    pub fn spawn(mut cmd: Command) -> Process {
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = port_in(&line).unwrap_or_else(|| panic!("no address in {line:?}"));
        Process { child, port, line }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The port of the first `127.0.0.1:PORT` in `line`.
pub fn port_in(line: &str) -> Option<u16> {
    line.split("127.0.0.1:")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// An axum app served on a thread of its own; stops on drop, or after
/// [`APP_LIFETIME`].
pub struct App {
    pub port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl App {
    /// Serve `app` on 127.0.0.1 and a free port.
    pub fn start(app: axum::Router) -> App {
        App::run(|listener, stopped| async move {
            let end = async {
                let _ = tokio::time::timeout(APP_LIFETIME, stopped).await;
            };
            let _ = axum::serve(listener, app).with_graceful_shutdown(end).await;
        })
    }

    /// Run `serve` on a thread of its own (a one-worker runtime) with a
    /// listener on 127.0.0.1 and a free port. `stopped` resolves when the
    /// [`App`] is dropped; `serve` must end then, or by [`APP_LIFETIME`].
    pub fn run<F, Fut>(serve: F) -> App
    where
        F: FnOnce(tokio::net::TcpListener, tokio::sync::oneshot::Receiver<()>) -> Fut
            + Send
            + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                serve(listener, stopped).await;
            });
        });
        App {
            port,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::port_in;

    #[test]
    fn the_port_comes_from_the_first_loopback_address() {
        assert_eq!(
            port_in("serving /s at http://127.0.0.1:4312/\n"),
            Some(4312)
        );
        assert_eq!(
            port_in("serving the OpenAI endpoint at http://127.0.0.1:80/v1"),
            Some(80)
        );
        assert_eq!(port_in("serving at http://[::1]:80/"), None);
    }
}

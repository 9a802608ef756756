//! moto servers forked from one process that has imported moto already (`moto_zygote.py`).
//!
//! Starting `moto_server` costs about 1.5 s of CPU before it answers, and its first EC2,
//! CloudFormation and Lambda requests load their data: some 1.9 s a server, measured, against
//! 0.4 s for a forked one. A test run starts about seventy servers on two cores, so the imports
//! were a sixth of the emulators' CPU. One zygote per process imports once; each
//! [`crate::moto::MotoServer`] is then a fork of it, a fresh server with no state of another's.
//! The zygote ends when this process does (its stdin closes), and its servers with it.
//!
//! `MOTO_ZYGOTE=0` starts every server as its own `moto_server` process, as before.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

const SCRIPT: &str = include_str!("moto_zygote.py");

/// A server forked by the zygote: its pid and its parent's (the zygote's), so a pid the kernel
/// has since given to another process is never killed.
#[derive(Debug)]
pub(crate) struct Forked {
    pub pid: u32,
    zygote: u32,
}

impl Forked {
    /// Whether the server still runs (the zygote has the kernel reap its children at once).
    pub fn alive(&self) -> bool {
        parent_of(self.pid) == Some(self.zygote)
    }

    /// Kills the server and waits, a few seconds at most, until it is gone.
    pub async fn stop(&self) {
        self.kill();
        let started = Instant::now();
        while self.alive() && started.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn kill(&self) {
        if self.alive() {
            // SAFETY: kill(2) on a pid whose parent is this process's zygote: its own server.
            unsafe {
                libc::kill(self.pid as libc::pid_t, libc::SIGKILL);
            }
        }
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The interpreter to fork servers from: the `python3` beside `moto_server` (the venv's), unless
/// `MOTO_ZYGOTE=0`.
pub(crate) fn python_for(moto_server: &Path) -> Option<PathBuf> {
    if std::env::var_os("MOTO_ZYGOTE").is_some_and(|v| v == "0") {
        return None;
    }
    let python = moto_server.with_file_name("python3");
    python.is_file().then_some(python)
}

/// Forks a server on `port` from the zygote of `python` with `fixes` (started on first use, and
/// again if it died).
pub(crate) async fn fork(python: PathBuf, fixes: PathBuf, port: u16) -> Result<Forked> {
    tokio::task::spawn_blocking(move || {
        let mut zygotes = ZYGOTES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut last = None;
        for _ in 0..2 {
            let at = match zygotes
                .iter()
                .position(|z| z.python == python && z.fixes == fixes)
            {
                Some(at) => at,
                None => {
                    zygotes.push(Zygote::start(&python, &fixes)?);
                    zygotes.len() - 1
                }
            };
            let zygote = &mut zygotes[at];
            match zygote.ask(port) {
                Ok(Ok(pid)) => {
                    return Ok(Forked {
                        pid,
                        zygote: zygote.child.id(),
                    });
                }
                Ok(Err(why)) => bail!("the moto zygote could not fork a server: {why}"),
                // Gone: replaced once. (A zygote that answers is never replaced: its servers
                // would die with it.)
                Err(e) => {
                    last = Some(e);
                    zygotes.swap_remove(at);
                }
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("the moto zygote did not fork")))
    })
    .await
    .context("forking a moto server")?
}

/// One per interpreter and set of fixes (in practice one per process).
static ZYGOTES: Mutex<Vec<Zygote>> = Mutex::new(Vec::new());

struct Zygote {
    python: PathBuf,
    fixes: PathBuf,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Zygote {
    fn start(python: &Path, fixes: &Path) -> Result<Self> {
        let mut child = Command::new(python)
            .arg("-c")
            .arg(SCRIPT)
            // moto_fixes/, loaded as sitecustomize: every fork has them applied.
            .env("PYTHONPATH", fixes)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting the moto zygote with {}", python.display()))?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        Ok(Self {
            python: python.to_owned(),
            fixes: fixes.to_owned(),
            child,
            stdin,
            stdout,
        })
    }

    /// One line each way: the port, then the server's pid or why there is none. `Err`: the
    /// zygote is gone.
    fn ask(&mut self, port: u16) -> Result<Result<u32, String>> {
        writeln!(self.stdin, "{port}").context("the moto zygote is gone")?;
        self.stdin.flush().context("the moto zygote is gone")?;
        let mut answer = String::new();
        if self.stdout.read_line(&mut answer)? == 0 {
            let status = self.child.try_wait().ok().flatten();
            bail!("the moto zygote exited ({status:?}); its error is above");
        }
        let answer = answer.trim();
        Ok(answer.parse().map_err(|_| answer.to_owned()))
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The parent pid of `pid` (`/proc/<pid>/stat`'s fourth field), if it runs.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: the fields follow its last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.next()?.parse().ok()
}

//! The run's MCP servers: each started in the sandbox (`Backend::spawn`)
//! when the run starts, to learn its tools, and spoken to over its pipes
//! (`ah_tools::mcp`). A call is a step of the run like any other. A
//! server ends whenever the sandbox ends every process a command left
//! (`Backend::sweeps`), so it is started again, with a new handshake, at
//! its next call after a command ran. A server that ends during a call,
//! does not answer in time or says something that is not MCP gives the
//! model an error result, and is ended with everything else the sandbox
//! runs. What a server writes to its standard error goes to
//! `mcp/NAME.stderr` in the run directory, up to [`STDERR_CAP`] bytes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use ah_sandbox::{Backend, BackendKind, Program, Spawned};
use ah_tools::input::Input;
use ah_tools::mcp::wire::{Conn, McpError};
use ah_tools::mcp::{self, McpServer, McpTool, client};
use ah_tools::{OutputLimits, ToolOutput};

/// The most bytes of a server's standard error kept, over all its starts.
pub const STDERR_CAP: u64 = 1024 * 1024;

/// How long ending a failed server's processes may take.
const END_TIMEOUT: Duration = Duration::from_secs(30);

/// The servers of a run, and the tools they offer.
#[derive(Default)]
pub struct McpServers {
    slots: Vec<Slot>,
}

struct Slot {
    server: McpServer,
    live: Option<Live>,
    stderr: Arc<StderrLog>,
    /// How often it was started.
    starts: u32,
}

/// A started server.
struct Live {
    spawned: Spawned,
    conn: Conn,
    /// The backend's sweeps when it started: once they grew, it has ended.
    sweeps: u64,
}

impl McpServers {
    /// Starts `servers` in `backend`, all at once, and lists their tools;
    /// what to tell the user about each (started with its tools, or why
    /// not).
    pub async fn start(
        servers: Vec<McpServer>,
        backend: &dyn Backend,
        run_dir: &Path,
    ) -> (McpServers, Vec<Arc<McpTool>>, Vec<String>) {
        let mut slots: Vec<Slot> = servers
            .into_iter()
            .map(|server| Slot {
                stderr: Arc::new(StderrLog::new(run_dir, &server.name)),
                server,
                live: None,
                starts: 0,
            })
            .collect();
        let opened = join_all(slots.iter_mut().map(|slot| slot.open(backend))).await;
        let mut tools = Vec::new();
        let mut lines = Vec::new();
        let mut kept = Vec::new();
        let mut failed = false;
        for (mut slot, opened) in slots.into_iter().zip(opened) {
            let name = slot.server.name.clone();
            let (info, listed, more) = match opened {
                Ok(found) => found,
                Err(err) => {
                    slot.stop_host().await;
                    failed = true;
                    lines.push(format!(
                        "MCP server {name} did not start: {err}; its tools are not offered \
                         (its standard error: {})",
                        slot.stderr.path.display()
                    ));
                    continue;
                }
            };
            let (offered, skipped) = mcp::offered(&slot.server, &listed);
            let names: Vec<&str> = offered.iter().map(|tool| tool.name.as_str()).collect();
            lines.push(format!(
                "MCP server {name} ({}, {}): {} tool(s): {}",
                if info.is_empty() {
                    "no name given"
                } else {
                    &info
                },
                match backend.kind() {
                    BackendKind::Podman => "in the sandbox",
                    BackendKind::None => "on the host, in the work copy: no sandbox",
                },
                names.len(),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                },
            ));
            for why in skipped {
                lines.push(format!("MCP server {name}: tool {why}: not offered"));
            }
            if more {
                lines.push(format!(
                    "MCP server {name}: only its first {} tools are offered",
                    client::MAX_TOOLS
                ));
            }
            tools.extend(offered.into_iter().map(Arc::new));
            kept.push(slot);
        }
        // What a failed server left in the container ends now (the others
        // with it: they start again at their first call).
        if failed && backend.kind() == BackendKind::Podman {
            let _ = backend.exec(":", END_TIMEOUT).await;
        }
        (McpServers { slots: kept }, tools, lines)
    }

    /// Calls `tool` with `input` (checked against its schema first),
    /// starting its server again if it has ended since.
    pub async fn call(
        &mut self,
        tool: &McpTool,
        input: &Value,
        backend: &dyn Backend,
        limits: &OutputLimits,
    ) -> ToolOutput {
        if let Err(message) = Input::check(&tool.spec(), input) {
            return ToolOutput::error(message);
        }
        let Some(slot) = self.slots.iter_mut().find(|s| s.server.name == tool.server) else {
            return ToolOutput::error(format!("no MCP server {} in this run", tool.server));
        };
        let restarted = slot.gone(backend);
        if restarted {
            slot.live = None;
        }
        let failed = |slot: &Slot, err: &McpError| ToolOutput {
            may_change_files: true,
            details: json!({"server": slot.server.name, "tool": tool.tool}),
            ..ToolOutput::error(format!(
                "MCP server {}: {err}; it was stopped and starts again at the next call \
                 (its standard error: {})",
                slot.server.name,
                slot.stderr.path.display()
            ))
        };
        if slot.live.is_none()
            && let Err(err) = slot.connect(backend).await
        {
            slot.end(backend).await;
            return failed(slot, &err);
        }
        let live = slot.live.as_mut().expect("connected");
        let timeout = Duration::from_secs(slot.server.timeout);
        let mut output = match client::call_tool(&mut live.conn, &tool.tool, input, timeout).await {
            Ok(result) => mcp::output(tool, &result, limits),
            Err(err) if err.is_fatal() => {
                slot.end(backend).await;
                return failed(slot, &err);
            }
            Err(err) => ToolOutput {
                may_change_files: true,
                ..ToolOutput::error(format!("MCP server {}: {err}", slot.server.name))
            },
        };
        output.details["starts"] = json!(slot.starts);
        output
    }

    /// Ends every server's host side (a server in a container ends with
    /// the container).
    pub async fn shutdown(&mut self) {
        for slot in &mut self.slots {
            slot.stop_host().await;
        }
    }
}

impl Slot {
    /// Whether a started server has ended: a sweep took it, or it exited.
    fn gone(&mut self, backend: &dyn Backend) -> bool {
        match &mut self.live {
            None => false,
            Some(live) => {
                live.sweeps != backend.sweeps()
                    || !matches!(live.spawned.child.try_wait(), Ok(None))
            }
        }
    }

    /// Starts the server and lists its tools: its name and version as it
    /// gives them, its tools, and whether it had more than ah takes.
    async fn open(
        &mut self,
        backend: &dyn Backend,
    ) -> Result<(String, Vec<Value>, bool), McpError> {
        let info = self.connect(backend).await?;
        let live = self.live.as_mut().expect("connected");
        let timeout = Duration::from_secs(self.server.startup_timeout);
        let (listed, more) = client::list_tools(&mut live.conn, timeout).await?;
        Ok((info, listed, more))
    }

    /// Starts the server and makes the handshake; the server's name and
    /// version as it gives them.
    async fn connect(&mut self, backend: &dyn Backend) -> Result<String, McpError> {
        let program = Program {
            command: &self.server.command,
            args: &self.server.args,
            env: &self.server.env,
        };
        let sweeps = backend.sweeps();
        let mut spawned = backend.spawn(&program).await.map_err(McpError::Write)?;
        self.starts += 1;
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            spawned.child.stdin.take(),
            spawned.child.stdout.take(),
            spawned.child.stderr.take(),
        ) else {
            return Err(McpError::Garbage("its pipes could not be opened".into()));
        };
        tokio::spawn(Arc::clone(&self.stderr).pump(stderr));
        let live = self.live.insert(Live {
            spawned,
            conn: Conn::new(Box::new(stdout), Box::new(stdin)),
            // A sandbox started by the spawn had swept nothing before.
            sweeps: sweeps.max(backend.sweeps()),
        });
        let timeout = Duration::from_secs(self.server.startup_timeout);
        let info = client::handshake(&mut live.conn, timeout).await?;
        live.spawned.started();
        Ok(info)
    }

    /// Ends the server: its host side, and in a container every process
    /// but the init (the same sweep that follows every command).
    async fn end(&mut self, backend: &dyn Backend) {
        self.stop_host().await;
        if backend.kind() == BackendKind::Podman {
            let _ = backend.exec(":", END_TIMEOUT).await;
        }
    }

    /// Kills the process group of the server's host side (the server
    /// itself with `--backend none`, its `podman exec` otherwise).
    async fn stop_host(&mut self) {
        let Some(mut live) = self.live.take() else {
            return;
        };
        if let Some(pid) = live
            .spawned
            .child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
        {
            // SAFETY: killpg has no memory effects; the group is the
            // spawned process's own (it leads it).
            unsafe { libc::killpg(pid, libc::SIGKILL) };
        }
        let _ = live.spawned.child.wait().await;
    }
}

impl Live {
    /// Kills the process group of the server's host side: the server and
    /// whatever it started with `--backend none`, its `podman exec`
    /// otherwise. Nothing once the process was waited for (its id, and
    /// so its group's, may be another's by then).
    fn kill_group(&self) {
        if let Some(pid) = self
            .spawned
            .child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
        {
            // SAFETY: killpg has no memory effects; the group is the
            // spawned process's own (it leads it, and is not reaped).
            unsafe { libc::killpg(pid, libc::SIGKILL) };
        }
    }
}

impl Drop for Live {
    /// A run cut short (an error, Ctrl+C) leaves no server on the host.
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// A server's standard error in the run directory, bounded over all its
/// starts.
struct StderrLog {
    path: PathBuf,
    written: AtomicU64,
}

impl StderrLog {
    fn new(run_dir: &Path, name: &str) -> StderrLog {
        StderrLog {
            path: run_dir.join("mcp").join(format!("{name}.stderr")),
            written: AtomicU64::new(0),
        }
    }

    /// Copies `stderr` to the file until it ends, keeping at most
    /// [`STDERR_CAP`] bytes (the rest is read and dropped, so the server
    /// never blocks on it), with secrets ah knows taken out.
    async fn pump(self: Arc<StderrLog>, mut stderr: impl AsyncRead + Unpin) {
        let file = async {
            if let Some(dir) = self.path.parent() {
                tokio::fs::create_dir_all(dir).await?;
            }
            tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .await
        };
        let mut file = file.await.ok();
        let mut chunk = vec![0; 64 * 1024];
        loop {
            let n = match stderr.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let Some(out) = file.as_mut() else { continue };
            let before = self.written.fetch_add(n as u64, Ordering::Relaxed);
            if before >= STDERR_CAP {
                continue;
            }
            let room = usize::try_from(STDERR_CAP - before).unwrap_or(usize::MAX);
            let text = ah_llm::redact::bytes(&chunk[..n.min(room)]).into_owned();
            let mut result = out.write_all(&text).await;
            if n > room && result.is_ok() {
                result = out
                    .write_all(b"\n[ah: cut here: the rest of its standard error is dropped]\n")
                    .await;
            }
            if result.is_err() {
                file = None;
            }
        }
    }
}

//! The run's MCP servers: all started in the sandbox (`Backend::spawn`)
//! when the run starts, to learn their tools, and spoken to over their
//! pipes (`ah_tools::mcp`). A call is a step of the run like any other. A
//! server ends whenever the sandbox ends every process a command left
//! (`Backend::sweeps`), and before a step of a phase that must not change
//! `/work`; it is started again, with a new handshake, at its next call. A
//! server that ends during a call, does not answer in time or says
//! something that is not MCP gives the model an error result, and is
//! ended with everything else the sandbox runs. What a server writes to
//! its standard error goes to `mcp/NAME.stderr` in the run directory
//! (`stderr`): all it wrote before it was stopped, since it is ended in
//! the container before its host side, and the pipe read to its end. What a server says of itself, or in an error, reaches the
//! user's lines escaped onto one line and cut ([`line_safe`]).

mod stderr;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ah_base::count;
use futures_util::future::join_all;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use serde_json::{Value, json};

use ah_sandbox::{Backend, BackendKind, Program, Spawned};
use ah_tools::input::Input;
use ah_tools::mcp::client::{self, Listing};
use ah_tools::mcp::wire::{Conn, Deadline, McpError};
use ah_tools::mcp::{self, McpServer, McpTool};
use ah_tools::{OutputLimits, ToolOutput};
use stderr::StderrLog;

use crate::safe_text::line_safe;

/// How long ending a failed server's processes may take.
const END_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the host side of a server is waited for: to end by itself
/// once its server in the container was ended, and to be reaped once
/// killed.
const REAP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long what is left of a stopped server's standard error is read for,
/// until its end.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The most characters of what a server says (of itself, in an error)
/// shown in one of the lines about it.
const MAX_SAID: usize = 300;

/// The process groups of every server's host side still running, for
/// [`end_host_groups`].
static HOST_GROUPS: std::sync::Mutex<Vec<Pid>> = std::sync::Mutex::new(Vec::new());

/// Kills the host side of every server (its process group) at once: for
/// an exit that skips destructors (a second Ctrl+C).
pub fn end_host_groups() {
    if let Ok(groups) = HOST_GROUPS.lock() {
        for &group in groups.iter() {
            // A group is listed only while its leader is not reaped.
            let _ = rustix::process::kill_process_group(group, Signal::KILL);
        }
    }
}

/// Ends every process in a container `backend` but its init, as the
/// end of every command does (a host process is ended by its group), and
/// says whether it did: a server's `podman exec` then ends by itself once
/// it has passed on all its server wrote.
async fn sweep(backend: &dyn Backend) -> bool {
    let container = backend.kind().is_podman();
    if container {
        let _ = backend.exec(":", END_TIMEOUT).await;
    }
    container
}

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

/// Why a started server is of no more use.
enum Gone {
    /// A sweep ended it, and all it left, with everything else in the
    /// sandbox.
    Swept,
    /// It exited, or a request of a step cut short is still under way.
    Broken,
}

/// A started server.
struct Live {
    spawned: Spawned,
    conn: Conn,
    /// A request is under way (set while one is; still set when the step
    /// that made it was cut short, which leaves the pipes mid-message).
    busy: bool,
    /// The copying of its standard error to the run directory, which ends
    /// with the pipe.
    stderr: tokio::task::JoinHandle<()>,
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
        let mut failed = Vec::new();
        let place = match backend.kind() {
            BackendKind::Podman => "in the sandbox",
            BackendKind::PodmanRemote => "in the sandbox, on the remote engine",
            BackendKind::None => "on the host, in the work copy: no sandbox",
        };
        for (slot, opened) in slots.into_iter().zip(opened) {
            let name = slot.server.name.clone();
            let (info, listing) = match opened {
                Ok(found) => found,
                Err(err) => {
                    lines.push(format!(
                        "MCP server {name} did not start: {}; its tools are not offered \
                         (its standard error: {})",
                        line_safe(&err.to_string(), MAX_SAID),
                        slot.stderr.path().display()
                    ));
                    failed.push(slot);
                    continue;
                }
            };
            let (offered, skipped) = mcp::offered(&slot.server, &listing.tools);
            lines.push(started_line(&name, &info, place, &offered));
            for why in skipped {
                let why = line_safe(&why, MAX_SAID);
                lines.push(format!("MCP server {name}: tool {why}: not offered"));
            }
            if let Some(why) = listing.left_out {
                lines.push(format!("MCP server {name}: {why}"));
            }
            tools.extend(offered.into_iter().map(Arc::new));
            kept.push(slot);
        }
        // A failed server ends now, and what it left in the container (the
        // others with it: they start again at their first call).
        if !failed.is_empty() {
            let swept = sweep(backend).await;
            for mut slot in failed {
                slot.stop_host(swept).await;
            }
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
        match slot.gone(backend) {
            // A sweep ended it: only its host side is left.
            Some(Gone::Swept) => slot.stop_host(true).await,
            // What it left in the sandbox ends too.
            Some(Gone::Broken) => slot.end(backend).await,
            None => {}
        }
        let failed = |slot: &Slot, err: &McpError| ToolOutput {
            may_change_files: true,
            details: json!({"server": slot.server.name, "tool": tool.tool}),
            // The model is told of the file by its place in the run's
            // folder: a path of the host's is none of its business.
            ..ToolOutput::error(format!(
                "MCP server {}: {err}; it was stopped and starts again at the next call \
                 (the user finds its standard error in the run's folder, as {})",
                slot.server.name,
                stderr::in_run_dir(&slot.server.name).display()
            ))
        };
        let timeout = slot.server.timeout;
        let live = match slot.live {
            Some(ref mut live) => live,
            None => match slot.connect(backend).await {
                Ok((_, _, live)) => live,
                Err(err) => {
                    slot.end(backend).await;
                    return failed(slot, &err);
                }
            },
        };
        let deadline = Deadline::after(timeout);
        live.busy = true;
        let answer = client::call_tool(&mut live.conn, &tool.tool, input, deadline).await;
        live.busy = false;
        let mut output = match answer {
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

    /// Whether a server is running (and may have read `/work` since the
    /// last step).
    pub fn running(&self) -> bool {
        self.slots.iter().any(|slot| slot.live.is_some())
    }

    /// Ends every server still running (before a step that must not
    /// change `/work`).
    pub async fn end_all(&mut self, backend: &dyn Backend) {
        if self.slots.iter().any(|slot| slot.live.is_some()) {
            let swept = sweep(backend).await;
            for slot in &mut self.slots {
                slot.stop_host(swept).await;
            }
        }
    }

    /// Ends every server's host side (a server in a container ends with
    /// the container).
    pub async fn shutdown(&mut self) {
        for slot in &mut self.slots {
            slot.stop_host(false).await;
        }
    }
}

/// What the user is told of a server that started: who it says it is
/// (on the line, escaped), where it runs and the tools it offers.
fn started_line(name: &str, info: &str, place: &str, offered: &[McpTool]) -> String {
    let info = if info.is_empty() {
        "no name given".to_string()
    } else {
        line_safe(info, MAX_SAID)
    };
    let names: Vec<&str> = offered.iter().map(|tool| tool.name.as_str()).collect();
    let names = match names.is_empty() {
        true => "none".to_string(),
        false => names.join(", "),
    };
    format!(
        "MCP server {name} ({info}, {place}): {}: {names}",
        count(offered.len(), "tool", "tools")
    )
}

impl Slot {
    /// Whether a started server is of no more use, and why.
    fn gone(&self, backend: &dyn Backend) -> Option<Gone> {
        let live = self.live.as_ref()?;
        // A sweep since its start ended everything it was and left.
        if live.spawned.sweeps != backend.sweeps() {
            Some(Gone::Swept)
        } else if live.busy || live.exited() {
            Some(Gone::Broken)
        } else {
            None
        }
    }

    /// Starts the server and lists its tools, within its startup timeout:
    /// its name and version as it gives them, and its tools.
    async fn open(&mut self, backend: &dyn Backend) -> Result<(String, Listing), McpError> {
        let (info, deadline, live) = self.connect(backend).await?;
        let listing = client::list_tools(&mut live.conn, deadline).await?;
        Ok((info, listing))
    }

    /// Starts the server and makes the handshake within its startup
    /// timeout, counted once the sandbox runs it (a sandbox still starting
    /// is waited for first): the server's name and version as it gives
    /// them, the deadline, for what else belongs to its start, and the
    /// server now live.
    async fn connect(
        &mut self,
        backend: &dyn Backend,
    ) -> Result<(String, Deadline, &mut Live), McpError> {
        let program = Program {
            command: &self.server.command,
            args: &self.server.args,
            env: &self.server.env,
        };
        let mut spawned = backend.spawn(&program).await.map_err(McpError::Start)?;
        let deadline = Deadline::after(self.server.startup_timeout);
        self.starts += 1;
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            spawned.child.stdin.take(),
            spawned.child.stdout.take(),
            spawned.child.stderr.take(),
        ) else {
            return Err(McpError::Start(std::io::Error::other(
                "its pipes could not be opened",
            )));
        };
        let stderr = tokio::spawn(Arc::clone(&self.stderr).pump(stderr));
        // Busy until the handshake is over: a start cut short is no start.
        let live = self.live.insert(Live {
            spawned,
            conn: Conn::new(Box::new(stdout), Box::new(stdin)),
            busy: true,
            stderr,
        });
        if let (Some(pid), Ok(mut groups)) = (live.pid(), HOST_GROUPS.lock()) {
            groups.push(pid);
        }
        let info = client::handshake(&mut live.conn, deadline).await?;
        live.spawned.started();
        live.busy = false;
        Ok((info, deadline, live))
    }

    /// Ends the server: in a container first, with every process but the
    /// init (the same sweep that follows every command), then its host
    /// side. Killed first, a `podman exec` would take with it what the
    /// server wrote that it had not passed on yet.
    async fn end(&mut self, backend: &dyn Backend) {
        let swept = sweep(backend).await;
        self.stop_host(swept).await;
    }

    /// Ends the server's host side: once its server in the container was
    /// `swept`, it is given a while to end by itself; then it is killed
    /// and reaped, and its standard error read to its end (each for a
    /// while at most), so that the file keeps every line written before.
    async fn stop_host(&mut self, swept: bool) {
        let Some(mut live) = self.live.take() else {
            return;
        };
        if swept {
            let _ = tokio::time::timeout(REAP_TIMEOUT, live.spawned.child.wait()).await;
        }
        live.kill_group();
        live.unlist();
        let _ = live.spawned.child.start_kill();
        let _ = tokio::time::timeout(REAP_TIMEOUT, live.spawned.child.wait()).await;
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, &mut live.stderr).await;
    }
}

impl Live {
    /// Whether the server's host side has exited; it is not reaped, so
    /// its process group can still be killed by its id.
    fn exited(&self) -> bool {
        let Some(pid) = self.pid() else {
            return true;
        };
        // WNOWAIT leaves the child to be reaped by its owner; no status
        // yet means it runs, and a failed call counts as exited.
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        !matches!(rustix::process::waitid(WaitId::Pid(pid), options), Ok(None))
    }

    /// Takes its group out of [`HOST_GROUPS`] (before it is reaped).
    fn unlist(&self) {
        if let (Some(pid), Ok(mut groups)) = (self.pid(), HOST_GROUPS.lock()) {
            groups.retain(|&group| group != pid);
        }
    }

    fn pid(&self) -> Option<Pid> {
        self.spawned
            .child
            .id()
            .and_then(|pid| Pid::from_raw(i32::try_from(pid).ok()?))
    }

    /// Kills the process group of the server's host side: the server and
    /// whatever it started with `--backend none`, its `podman exec`
    /// otherwise. Nothing once the process was reaped (its id, and so its
    /// group's, may be another's by then).
    fn kill_group(&self) {
        if let Some(pid) = self.pid() {
            // The group is the spawned process's own (it leads it, and is
            // not reaped).
            let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        }
    }
}

impl Drop for Live {
    /// A run cut short (an error, Ctrl+C) leaves no server on the host.
    fn drop(&mut self) {
        self.kill_group();
        self.unlist();
    }
}

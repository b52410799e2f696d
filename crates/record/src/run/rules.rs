//! What a run's steps may do for a while: which of ah's tools the model is
//! offered, whether `/work` is read-only, and which tools the run's owner
//! answers on the host instead of in the sandbox (the work loop's `report`
//! and `verdict`). A plain run keeps the defaults: every tool, read-write,
//! nothing on the host. The project's own tools (`.ah/tools/`) join any
//! rules that let `/work` be written, in place of ah's tools of the same
//! name, and so do the tools of the run's MCP servers (`Run` adds both).

use std::sync::Arc;

use serde_json::Value;

use ah_llm::ToolDef;
use ah_llm::models::EditFormat;
use ah_tools::input::Input;
use ah_tools::mcp::McpTool;
use ah_tools::project::ProjectTool;
use ah_tools::{self as tools, ToolOutput};

/// A tool answered on the host by whoever drives the run. It never touches
/// the work copy, so its calls are steps without a commit.
pub trait HostTool: Send + Sync {
    fn spec(&self) -> ToolDef;

    /// Runs the call; `input` has passed the spec's schema.
    fn call(&self, input: &Value) -> ToolOutput;
}

/// The rules for the next steps, set with `Run::set_rules`.
#[derive(Clone)]
pub struct StepRules {
    /// The names of ah's own tools on offer (`read`, `write`, `edit`,
    /// `apply_patch`, `bash`), in the order of [`tools::specs`]; of the two
    /// edit tools, the model is offered the one of its edit format.
    builtin: Vec<String>,
    /// `/work` is read-only: `write` and `edit` are refused, the read-only
    /// sandbox (when the run has one) runs commands, and whatever a command
    /// still changed is undone and recorded as a violation.
    read_only: bool,
    host: Vec<Arc<dyn HostTool>>,
    /// The project's tools, run in the sandbox like `bash`.
    project: Vec<Arc<ProjectTool>>,
    /// The MCP servers' tools, called in the sandbox.
    mcp: Vec<Arc<McpTool>>,
    /// The names [`StepRules::only`] kept, which bound the project's and
    /// the MCP servers' tools too.
    only: Option<Vec<String>>,
}

impl Default for StepRules {
    fn default() -> StepRules {
        StepRules {
            builtin: tools::names(),
            read_only: false,
            host: Vec::new(),
            project: Vec::new(),
            mcp: Vec::new(),
            only: None,
        }
    }
}

/// Where one tool call goes under the rules.
pub(super) enum Route {
    Builtin,
    Project(Arc<ProjectTool>),
    Mcp(Arc<McpTool>),
    Host(Arc<dyn HostTool>),
    Refused(String),
}

impl StepRules {
    /// Every tool, read-write: what a plain run has.
    pub fn read_write() -> StepRules {
        StepRules::default()
    }

    /// `/work` read-only, with only `read` and `bash` of ah's own tools.
    pub fn read_only() -> StepRules {
        StepRules {
            builtin: vec!["read".to_string(), "bash".to_string()],
            read_only: true,
            ..StepRules::default()
        }
    }

    /// Keeps only the named tools of ah's own. Naming either edit tool
    /// keeps both, so the model gets the one of its edit format.
    pub fn only(mut self, names: &[&str]) -> StepRules {
        let edits = ["edit", "apply_patch"];
        let any_edit = names.iter().any(|name| edits.contains(name));
        self.builtin.retain(|name| {
            names.contains(&name.as_str()) || (any_edit && edits.contains(&name.as_str()))
        });
        self.only = Some(names.iter().map(|name| name.to_string()).collect());
        self
    }

    /// Adds the project's `tools` (those [`StepRules::only`] kept), unless
    /// `/work` is read-only: a project's tool may write.
    pub fn with_project_tools(mut self, tools: &[Arc<ProjectTool>]) -> StepRules {
        self.project = self.writers(tools, |tool| &tool.name);
        self
    }

    /// Adds the MCP servers' `tools` (those [`StepRules::only`] kept),
    /// unless `/work` is read-only: a server may write.
    pub fn with_mcp_tools(mut self, tools: &[Arc<McpTool>]) -> StepRules {
        self.mcp = self.writers(tools, |tool| &tool.name);
        self
    }

    /// Which of `tools`, tools that may write, these rules offer.
    fn writers<T>(&self, tools: &[Arc<T>], name: impl Fn(&T) -> &String) -> Vec<Arc<T>> {
        if self.read_only {
            return Vec::new();
        }
        tools
            .iter()
            .filter(|tool| {
                self.only
                    .as_ref()
                    .is_none_or(|only| only.contains(name(tool)))
            })
            .cloned()
            .collect()
    }

    /// Adds a tool answered on the host.
    pub fn with_host_tool(mut self, tool: Arc<dyn HostTool>) -> StepRules {
        self.host.push(tool);
        self
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The definitions the model is offered: ah's own tools, then the host's.
    pub fn specs(&self, format: EditFormat) -> Vec<ToolDef> {
        let replaced = |name: &str| self.project.iter().any(|tool| tool.name == name);
        let hosted = |name: &str| self.host.iter().any(|tool| tool.spec().name == name);
        let mut specs: Vec<ToolDef> = tools::specs(format)
            .into_iter()
            .filter(|spec| self.builtin.contains(&spec.name) && !replaced(&spec.name))
            .collect();
        // A host tool of the engine's wins over a project tool of its name
        // (as in `route`): the model never sees one name twice.
        specs.extend(
            self.project
                .iter()
                .filter(|tool| !hosted(&tool.name))
                .map(|tool| tool.spec()),
        );
        // Their names hold `__`, which no other tool's may clash with
        // (ah's own and the engines' have none; a project's is refused).
        specs.extend(self.mcp.iter().map(|tool| tool.spec()));
        specs.extend(self.host.iter().map(|tool| tool.spec()));
        specs
    }

    pub(super) fn route(&self, name: &str) -> Route {
        if let Some(tool) = self.host.iter().find(|tool| tool.spec().name == name) {
            return Route::Host(Arc::clone(tool));
        }
        if let Some(tool) = self.project.iter().find(|tool| tool.name == name) {
            return Route::Project(Arc::clone(tool));
        }
        if let Some(tool) = self.mcp.iter().find(|tool| tool.name == name) {
            return Route::Mcp(Arc::clone(tool));
        }
        if self.builtin.iter().any(|own| own == name) {
            return Route::Builtin;
        }
        let offered: Vec<String> = self
            .builtin
            .iter()
            .cloned()
            .chain(self.project.iter().map(|tool| tool.name.clone()))
            .chain(self.mcp.iter().map(|tool| tool.name.clone()))
            .chain(self.host.iter().map(|tool| tool.spec().name))
            .collect();
        let why = if self.read_only && matches!(name, "write" | "edit" | "apply_patch") {
            "/work is read-only in this phase"
        } else {
            "it is not offered to this agent or phase"
        };
        Route::Refused(format!(
            "tool \"{name}\" is not available: {why}; the tools now are {}",
            offered.join(", ")
        ))
    }
}

/// A host tool's call, once its input has passed the schema.
pub(super) fn call_host(tool: &dyn HostTool, input: &Value) -> ToolOutput {
    let spec = tool.spec();
    match Input::check(&spec, input) {
        Ok(_) => tool.call(input),
        Err(message) => ToolOutput::error(message),
    }
}

#[cfg(test)]
mod tests;

//! The report's page: escaping, the runs' (or a batch's tasks') sortable
//! table, one section per run, and the style and the one script inline.
//! Nothing a run left is ever put in the script or an attribute unescaped;
//! the page's own policy lets only its style and that script (by its hash)
//! run, and loads nothing.

use std::fmt::Write;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::timeline::{seconds, svg};
use super::{RunView, TaskRow, diff};

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, for a text node or an
/// attribute value.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The longest task shown in a table cell, in characters.
const TASK_IN_TABLE: usize = 120;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin-bottom:1.5em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#eee;cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:' \\25B2'}
th[aria-sort=descending]::after{content:' \\25BC'}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tfoot td{font-weight:bold;background:#f6f6f6}
section.run{border-top:2px solid #888;margin-top:2em}
pre{background:#f8f8f8;border:1px solid #ddd;padding:.5em;overflow-x:auto;white-space:pre}
pre.diff span{display:block}
.add{background:#e6ffec;color:#116329}
.del{background:#ffebe9;color:#82071e}
.hunk{background:#ddf4ff;color:#0550ae}
.file{font-weight:bold;color:#444}
.note{color:#666;font-style:italic}
.passed{color:#116329}.failed{color:#82071e}
svg.timeline text{font-size:12px;fill:#333}
svg.timeline rect.model{fill:#4878d0}
svg.timeline rect.tool{fill:#ee854a}";

/// Sorts a table by the column whose header was clicked: by each cell's
/// `data-sort` number when it has one, else by its text. The headers say
/// so once the script has run.
const SCRIPT: &str = "document.querySelectorAll('table.sortable').forEach(function(table){
  table.querySelectorAll('thead th').forEach(function(th,col){
    th.title='Click to sort';
    th.addEventListener('click',function(){
      var down=th.getAttribute('aria-sort')==='ascending';
      table.querySelectorAll('thead th').forEach(function(o){o.removeAttribute('aria-sort');});
      th.setAttribute('aria-sort',down?'descending':'ascending');
      var body=table.tBodies[0];
      var rows=Array.prototype.slice.call(body.rows);
      var key=function(row){var cell=row.cells[col];var n=cell.getAttribute('data-sort');
        return n===null?cell.textContent:parseFloat(n);};
      rows.sort(function(a,b){var x=key(a),y=key(b);
        var c=typeof x==='number'&&typeof y==='number'?x-y:String(x).localeCompare(String(y));
        return down?-c:c;});
      rows.forEach(function(row){body.appendChild(row);});
    });
  });
});";

/// The whole page: the table of `tasks` (a batch) or of `runs`, then each
/// run.
pub(super) fn page(runs: &[RunView], tasks: Option<&[TaskRow]>) -> String {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT));
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'sha256-{hash}'; img-src data:\">\
         <title>ah report</title><style>{STYLE}</style></head><body>\n<h1>ah report</h1>\n"
    );
    match tasks {
        Some(tasks) => {
            task_table(&mut out, tasks);
            out.push_str("<h2>Runs of these tasks</h2>\n");
            if runs.is_empty() {
                out.push_str(
                    "<p class=\"note\">None of the runs the results name is in this project.</p>\n",
                );
            }
        }
        None => run_table(&mut out, runs),
    }
    for run in runs {
        section(&mut out, run);
    }
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body></html>\n");
    out
}

fn num(n: u64) -> String {
    format!("<td class=\"num\" data-sort=\"{n}\">{n}</td>")
}

fn lines_cell(added: u64, removed: u64) -> String {
    format!(
        "<td class=\"num\" data-sort=\"{}\">+{added} \u{2212}{removed}</td>",
        added + removed
    )
}

fn duration_cell(ms: Option<u64>) -> String {
    match ms {
        Some(ms) => format!("<td class=\"num\" data-sort=\"{ms}\">{}</td>", seconds(ms)),
        None => "<td class=\"num\" data-sort=\"-1\">\u{2013}</td>".to_string(),
    }
}

fn short(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(TASK_IN_TABLE).collect();
    match chars.next() {
        Some(_) => format!("{head}\u{2026}"),
        None => head,
    }
}

fn run_table(out: &mut String, runs: &[RunView]) {
    out.push_str(
        "<table class=\"sortable\" id=\"runs\"><thead><tr><th>run</th><th>task</th>\
         <th>status</th><th>check</th><th>files</th><th>+/\u{2212}</th><th>tokens</th>\
         <th>duration</th></tr></thead><tbody>\n",
    );
    let (mut files, mut added, mut removed, mut tokens, mut ms) = (0, 0, 0, 0, 0);
    for run in runs {
        let m = run.manifest.as_ref();
        let patch = m.and_then(|m| m.patch).unwrap_or_default();
        let task = m.map(|m| m.task.as_str()).unwrap_or_default();
        let used = run.tokens.input_tokens + run.tokens.output_tokens;
        files += u64::from(patch.files);
        added += patch.added;
        removed += patch.removed;
        tokens += used;
        ms += run.duration_ms().unwrap_or_default();
        let _ = writeln!(
            out,
            "<tr class=\"run\" id=\"row-{id}\"><td><a href=\"#run-{id}\">{id}</a></td>\
             <td class=\"task\" title=\"{full}\">{task}</td><td class=\"status\">{status}</td>\
             {check}{files}{lines}{tokens}{duration}</tr>",
            id = escape(&run.id),
            full = escape(task),
            task = escape(&short(task)),
            status = escape(&run.status()),
            check = check_cell(run),
            files = num(u64::from(patch.files)),
            lines = lines_cell(patch.added, patch.removed),
            tokens = num(used),
            duration = duration_cell(run.duration_ms()),
        );
    }
    let _ = writeln!(
        out,
        "</tbody><tfoot><tr class=\"total\"><td>{n} runs</td><td></td><td></td><td></td>\
         {files}{lines}{tokens}{duration}</tr></tfoot></table>",
        n = runs.len(),
        files = num(files),
        lines = lines_cell(added, removed),
        tokens = num(tokens),
        duration = duration_cell(Some(ms)),
    );
}

fn check_cell(run: &RunView) -> String {
    match run.check() {
        Some(check) if check.passed => "<td class=\"passed\">passed</td>".to_string(),
        Some(check) => match check.exit_code {
            Some(code) => format!("<td class=\"failed\">failed ({code})</td>"),
            None => "<td class=\"failed\">failed (did not finish)</td>".to_string(),
        },
        None => "<td>\u{2013}</td>".to_string(),
    }
}

fn task_table(out: &mut String, tasks: &[TaskRow]) {
    out.push_str(
        "<table class=\"sortable\" id=\"tasks\"><thead><tr><th>task</th><th>status</th>\
         <th>runs</th><th>files</th><th>+/\u{2212}</th><th>tokens</th><th>duration</th>\
         <th>applied</th></tr></thead><tbody>\n",
    );
    for task in tasks {
        let runs: Vec<String> = task
            .runs
            .iter()
            .map(|id| format!("<a href=\"#run-{0}\">{0}</a>", escape(id)))
            .collect();
        let _ = writeln!(
            out,
            "<tr class=\"task\"><td>{id}</td><td class=\"status\">{status}</td>\
             <td data-sort=\"{n}\">{runs}</td>{files}{lines}{tokens}{duration}<td>{applied}</td></tr>",
            id = escape(&task.id),
            status = escape(&task.status),
            n = task.runs.len(),
            runs = runs.join("<br>"),
            files = num(task.files),
            lines = lines_cell(task.added, task.removed),
            tokens = num(task.tokens.input_tokens + task.tokens.output_tokens),
            duration = duration_cell(Some(task.duration_ms)),
            applied = if task.applied { "yes" } else { "no" },
        );
    }
    out.push_str("</tbody></table>\n");
}

fn section(out: &mut String, run: &RunView) {
    let id = escape(&run.id);
    let _ = writeln!(
        out,
        "<section class=\"run\" id=\"run-{id}\"><h2>run {id}</h2>"
    );
    if let Some(problem) = &run.problem {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(problem));
    }
    if let Some(m) = &run.manifest {
        let _ = writeln!(
            out,
            "<pre class=\"task\">{}</pre>\n<p>model {} \u{b7} backend {} \u{b7} {} \u{b7} started {}</p>",
            escape(&m.task),
            escape(&m.model),
            escape(&m.backend),
            escape(&run.status()),
            escape(&m.started_at),
        );
    }
    out.push_str("<h3>Timeline</h3>\n");
    if run.turns.is_empty() {
        let why = run
            .timeline_note
            .as_deref()
            .unwrap_or("no turn with a tool call was recorded");
        let _ = writeln!(out, "<p class=\"note\">No timeline: {}.</p>", escape(why));
    } else {
        out.push_str(&svg(&run.turns));
        out.push_str(
            "\n<p class=\"note\">Per turn: the model call's time as the session recorded it \
             (blue), then the time the tools it called ran (orange), one after the other; the \
             time between them (the run's own work) is not shown.</p>\n",
        );
    }
    if let Some(check) = run.check() {
        let _ = writeln!(
            out,
            "<h3>Check</h3>\n<p><code>{}</code></p>",
            escape(&check.command)
        );
    }
    if let Some(log) = &run.check_log {
        if run.check().is_none() {
            out.push_str("<h3>Check</h3>\n");
        }
        let _ = writeln!(
            out,
            "<pre class=\"check\">{}</pre>",
            escape(&String::from_utf8_lossy(&log.bytes))
        );
        if log.cut {
            let _ = writeln!(
                out,
                "<p class=\"note\">The check's output goes on: only its first {} KiB are shown (check.log has it all).</p>",
                super::CHECK_LOG_CAP / 1024
            );
        }
    }
    out.push_str("<h3>Patch</h3>\n");
    match &run.patch {
        Some(patch) => {
            let _ = writeln!(
                out,
                "<pre class=\"diff\">{}</pre>",
                diff::render(&String::from_utf8_lossy(&patch.bytes))
            );
            if patch.cut {
                let _ = writeln!(
                    out,
                    "<p class=\"note\">The patch goes on: only its first {} MiB are shown (session.patch has it all).</p>",
                    super::PATCH_CAP / (1024 * 1024)
                );
            }
        }
        None => {
            let why = run
                .manifest
                .as_ref()
                .and_then(|m| m.patch_not_saved.clone())
                .unwrap_or_else(|| "the run saved no patch".to_string());
            let _ = writeln!(out, "<p class=\"note\">No patch: {}.</p>", escape(&why));
        }
    }
    out.push_str("</section>\n");
}

//! The `write` tool: creates or replaces a file, creating parent folders.
//! The write policy is asked first; a refused path is never touched.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use serde_json::json;

use super::fs_beneath::folder::folder_of;
use super::fs_beneath::{self, BeneathError};
use super::input::Input;
use super::path::{self, Resolved};
use super::{Exec, ToolOutput, bounds, truncate};
use ah_llm::ToolDef;

pub fn spec() -> ToolDef {
    ToolDef {
        name: "write".to_string(),
        description: "Create a file or replace its whole content. `path` is relative to /work or \
                      absolute under /work; missing parent folders are created. To change part of \
                      an existing file, prefer `edit`."
            .to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to write, e.g. src/lib.rs or /work/src/lib.rs"},
                "content": {"type": "string", "description": "The complete new content of the file"}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        }),
    }
}

pub async fn run(input: Input<'_>, exec: &dyn Exec) -> ToolOutput {
    let (path, content) = (input.string("path"), input.string("content"));
    let resolved = match path::resolve(exec.root(), path) {
        Ok(resolved) => resolved,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let shown = resolved.display();
    if let Err(reason) = allowed(&resolved, exec) {
        return ToolOutput::error(reason);
    }
    if content.len() as u64 > bounds::MAX_EDIT_BYTES {
        return ToolOutput::error(format!(
            "{} Nothing was written.",
            bounds::result_too_big(
                "write",
                &shown,
                content.len() as u64,
                bounds::MAX_EDIT_BYTES
            )
        ));
    }
    let created = match write_file(exec.root(), &resolved, content.as_bytes()).await {
        Ok(created) => created,
        Err(refused) => return refused,
    };
    let bytes = content.len();
    let verb = if created { "Created" } else { "Overwrote" };
    ToolOutput {
        content: truncate::tail(
            &format!("{verb} {shown} ({bytes} bytes)"),
            exec.limits().write,
        ),
        is_error: false,
        details: json!({"path": shown, "bytes": bytes, "created": created}),
        stdout: Vec::new(),
        stderr: Vec::new(),
        exit_code: None,
        may_change_files: true,
    }
}

/// Asks the write policy about `resolved`; the error is the model's message.
pub(super) fn allowed(resolved: &Resolved, exec: &dyn Exec) -> Result<(), String> {
    exec.check_write(&resolved.rel).map_err(|reason| {
        format!(
            "writing {} is not allowed: {reason}. Nothing was changed.",
            resolved.display()
        )
    })
}

/// Writes `bytes` to the file at `resolved`: staged as a temporary file in
/// its folder and renamed over it, so the file is never seen half written.
/// The folder is opened beneath `root` and an existing file is looked at
/// without following links, so no symlink swapped in after
/// [`path::resolve`] is followed; missing parent folders are created one by
/// one beneath it; an existing file keeps its permission bits. Returns
/// whether the file was created; an error is the tool's result.
async fn write_file(root: &Path, resolved: &Resolved, bytes: &[u8]) -> Result<bool, ToolOutput> {
    let (root, rel, shown) = (root.to_path_buf(), resolved.rel.clone(), resolved.display());
    let bytes = bytes.to_vec();
    fs_beneath::unblock(move || {
        let mode = match fs_beneath::open_file(&root, &rel, false) {
            Ok(file) => Some(
                file.metadata()
                    .map_err(|e| ToolOutput::error(format!("cannot inspect {shown}: {e}")))?
                    .permissions()
                    .mode()
                    & 0o7777,
            ),
            Err(BeneathError::NotFound) => None,
            // An existing directory: nothing was created or changed.
            Err(BeneathError::Directory) => {
                return Err(ToolOutput::error(format!(
                    "{shown} is a directory: give the path of a file inside it"
                )));
            }
            Err(BeneathError::Changed) => return Err(swapped(&shown)),
            Err(e) => return Err(ToolOutput::error(format!("cannot write {shown}: {e}"))),
        };
        let (folder, name) = match folder_of(&root, &rel, true) {
            Ok(found) => found,
            Err(BeneathError::Changed) => return Err(swapped(&shown)),
            Err(e) => return Err(changed(format!("cannot write {shown}: {e}"))),
        };
        let temp = folder
            .stage(&bytes, mode)
            .map_err(|e| changed(format!("cannot write {shown}: {e}")))?;
        if let Err(e) = folder.rename_into(&temp, &folder, &name) {
            let _ = folder.remove(&temp);
            return Err(changed(format!("cannot write {shown}: {e}")));
        }
        Ok(mode.is_none())
    })
    .await
    .unwrap_or_else(|message| Err(changed(message)))
}

/// A folder or the file was replaced by a link after the path was checked.
fn swapped(shown: &str) -> ToolOutput {
    changed(format!(
        "{shown} changed while it was being written: {}; the file was not written. Try again.",
        BeneathError::Changed
    ))
}

/// An error after which files may have changed: parent folders may have been
/// created, the file truncated.
fn changed(message: String) -> ToolOutput {
    ToolOutput {
        may_change_files: true,
        ..ToolOutput::error(message)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::test_exec::{DENIED, TestExec};

    /// The tool as the model reaches it: through [`crate::call`] and its
    /// schema check.
    async fn call(input: &Value, exec: &TestExec) -> ToolOutput {
        crate::call("write", input, exec).await
    }

    #[tokio::test]
    async fn content_over_the_cap_is_refused() {
        let exec = TestExec::new();
        let content = "x".repeat(9 << 20);
        let out = call(&json!({"path": "big.txt", "content": content}), &exec).await;
        assert!(out.is_error && !out.may_change_files);
        assert_eq!(
            out.content,
            "/work/big.txt would be 9.0 MiB, over the 8.0 MiB that write builds. Make smaller \
             changes, or use bash in the sandbox (e.g. `sed -i`, or a script). Nothing was \
             written."
        );
        assert!(!exec.path("big.txt").exists());
    }

    #[tokio::test]
    async fn creates_parents_and_reports_created_then_overwrites() {
        let exec = TestExec::new();
        let out = call(&json!({"path": "a/b/c.txt", "content": "hi\n"}), &exec).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            std::fs::read_to_string(exec.path("a/b/c.txt")).unwrap(),
            "hi\n"
        );
        assert_eq!(
            out.details,
            json!({"path": "/work/a/b/c.txt", "bytes": 3, "created": true})
        );
        assert!(out.may_change_files);

        let out = call(&json!({"path": "/work/a/b/c.txt", "content": "bye"}), &exec).await;
        assert_eq!(out.details["created"], json!(false));
        assert_eq!(
            std::fs::read_to_string(exec.path("a/b/c.txt")).unwrap(),
            "bye"
        );
    }

    #[tokio::test]
    async fn a_file_is_replaced_whole_by_rename_and_keeps_its_mode() {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let exec = TestExec::new();
        let path = exec.path("run.sh");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
        let before = std::fs::metadata(&path).unwrap().ino();
        // A reader holding the old file sees the old content, not a mix.
        let held = std::fs::File::open(&path).unwrap();
        let out = call(&json!({"path": "run.sh", "content": "new content"}), &exec).await;
        assert!(!out.is_error, "{}", out.content);
        let after = std::fs::metadata(&path).unwrap();
        assert_ne!(after.ino(), before, "a new file was renamed into place");
        assert_eq!(after.permissions().mode() & 0o7777, 0o751);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new content");
        assert_eq!(std::io::read_to_string(held).unwrap(), "old");
        let names: Vec<_> = std::fs::read_dir(exec.root())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["run.sh"], "no temporary file is left");
    }

    #[tokio::test]
    async fn policy_refusal_touches_nothing() {
        let exec = TestExec::new();
        let path = format!("{DENIED}/deep/new.txt");
        let out = call(&json!({"path": path, "content": "x"}), &exec).await;
        assert!(out.is_error);
        assert!(out.content.contains("is not allowed"), "{}", out.content);
        assert!(!out.may_change_files);
        // Not even the parent folder was created.
        assert!(!exec.path(DENIED).exists());
    }

    #[tokio::test]
    async fn symlink_to_outside_file_is_refused_and_nothing_is_written() {
        let exec = TestExec::new();
        let victim = exec.outside("victim.txt");
        std::fs::write(&victim, "original").unwrap();
        std::os::unix::fs::symlink(&victim, exec.path("link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", exec.path("passwd")).unwrap();
        let dangling = exec.outside("not-yet");
        std::os::unix::fs::symlink(&dangling, exec.path("dangling")).unwrap();

        for path in ["link", "passwd", "dangling"] {
            let out = call(&json!({"path": path, "content": "pwned"}), &exec).await;
            assert!(out.is_error, "{path}");
            assert!(out.content.contains("outside /work"), "{}", out.content);
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");
        assert!(!dangling.exists());
    }

    #[tokio::test]
    async fn directory_symlink_outside_does_not_create_folders_there() {
        let exec = TestExec::new();
        let outside_dir = exec.outside("elsewhere");
        std::fs::create_dir(&outside_dir).unwrap();
        std::os::unix::fs::symlink(&outside_dir, exec.path("dir")).unwrap();
        let out = call(&json!({"path": "dir/sub/f.txt", "content": "x"}), &exec).await;
        assert!(out.is_error);
        assert!(!outside_dir.join("sub").exists());
    }

    #[tokio::test]
    async fn write_file_never_follows_a_symlink_swapped_in_after_resolve() {
        // `rel` as `resolve` computed it before the swap: the open refuses the link.
        let exec = TestExec::new();
        let victim = exec.outside("victim");
        std::fs::write(&victim, "original").unwrap();
        std::os::unix::fs::symlink(&victim, exec.path("swapped")).unwrap();
        let raced = Resolved {
            host: exec.path("swapped"),
            rel: "swapped".to_string(),
        };
        let err = write_file(exec.root(), &raced, b"pwned").await.unwrap_err();
        assert!(
            err.content
                .starts_with("/work/swapped changed while it was being written: "),
            "{}",
            err.content
        );
        assert!(err.content.ends_with("Try again."), "{}", err.content);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");
    }

    #[tokio::test]
    async fn bad_input_and_directories_are_errors() {
        let exec = TestExec::new();
        let out = call(&json!({"path": "x"}), &exec).await;
        assert_eq!(
            out.content,
            "invalid input for write: missing required field \"content\""
        );
        let out = call(&json!({"path": 3, "content": "", "mode": "0644"}), &exec).await;
        assert_eq!(
            out.content,
            "invalid input for write: field \"path\" must be a string, got the number 3; \
             unknown field \"mode\" (the fields are content, path)"
        );
        assert!(out.is_error && !out.may_change_files);
        assert!(!exec.path("x").exists());
        std::fs::create_dir(exec.path("d")).unwrap();
        let out = call(&json!({"path": "d", "content": ""}), &exec).await;
        assert!(
            out.is_error && out.content.contains("is a directory"),
            "{}",
            out.content
        );
    }
}

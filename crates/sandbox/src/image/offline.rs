//! Building the image without a container registry: a minimal Debian rootfs
//! with the image's packages from the mirror apt already uses (and through
//! apt's proxy, if it has one), imported into podman. As root, debootstrap
//! makes the rootfs and `tar | podman import` takes it in. debootstrap needs
//! root (it chroots and makes device files), so a user without root uses
//! mmdebstrap in `unshare` mode instead: it builds inside a user namespace
//! with the user's subordinate ids (`/etc/subuid`, `/etc/subgid`, the same
//! ones rootless podman uses) and writes a tarball owned by root inside it,
//! which `podman import` maps into the user's storage. Both leave out what
//! [`DPKG_FILTERS`] exclude: mmdebstrap applies them to every package it
//! unpacks; debootstrap unpacks the required packages itself before dpkg
//! reads them, so what the filters exclude of those is removed afterwards.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

use super::{
    BuildOptions, DPKG_FILTERS, ImageError, OnProgress, PACKAGES, Phase, Progress, SUITE, stream,
};
use crate::podman::{CONTAINER_PATH, Podman, find_tool, rootless};

/// Used when apt's sources name no Debian mirror.
const FALLBACK_MIRROR: &str = "http://deb.debian.org/debian";

pub(super) async fn build(
    podman: &Podman,
    opts: &BuildOptions,
    progress: &mut OnProgress<'_>,
) -> Result<(), ImageError> {
    let rootless = rootless();
    let tool = match rootless {
        true => find_tool("mmdebstrap").ok_or(ImageError::MmdebstrapMissing)?,
        false => find_tool("debootstrap").ok_or(ImageError::DebootstrapMissing)?,
    };
    let mirror = match &opts.mirror {
        Some(mirror) => mirror.clone(),
        None => host_mirror(Path::new("/etc/apt")),
    };
    let proxy = apt_proxy().await;
    // The rootfs is large (~400 MB); /var/tmp is disk, /tmp may be RAM.
    let dir = tempfile::Builder::new()
        .prefix("ah-rootfs-")
        .tempdir_in("/var/tmp")
        .map_err(|source| ImageError::Io {
            what: "create a directory for the rootfs in /var/tmp",
            source,
        })?;
    if let Some(proxy) = &proxy {
        progress(Progress::Note(&format!("using apt's proxy {proxy}")));
    }
    if rootless {
        return build_unprivileged(podman, &tool, dir.path(), &mirror, proxy, opts, progress).await;
    }
    let rootfs = dir.path().join("rootfs");
    write_dpkg_filters(&rootfs)?;

    progress(Progress::Phase(Phase::Debootstrap));
    progress(Progress::Note(&format!(
        "debootstrap {SUITE} from {mirror}"
    )));
    let mut cmd = Command::new(&tool);
    cmd.args(["--variant=minbase", "--include"])
        .arg(PACKAGES.join(","))
        .arg(SUITE)
        .arg(&rootfs)
        .arg(&mirror)
        .stdin(Stdio::null());
    if let Some(proxy) = &proxy {
        cmd.env("http_proxy", proxy).env("https_proxy", proxy);
    }
    stream::run(
        cmd,
        "debootstrap",
        "check that apt can reach the mirror (apt-get update), or pass another mirror",
        progress,
    )
    .await?;

    // Downloaded packages and indexes are not needed in the image.
    for cache in ["var/cache/apt/archives", "var/lib/apt/lists"] {
        remove_files_in(&rootfs.join(cache));
    }
    remove_filtered(&rootfs);

    progress(Progress::Phase(Phase::Import));
    progress(Progress::Note(&format!(
        "importing the rootfs as {}",
        opts.image
    )));
    import(podman, &rootfs, &opts.image, progress).await
}

/// A user without root: `mmdebstrap --mode=unshare` writes the rootfs as a
/// tarball in `dir` (its own scratch space in `dir` too), and `podman
/// import` reads it.
async fn build_unprivileged(
    podman: &Podman,
    mmdebstrap: &Path,
    dir: &Path,
    mirror: &str,
    proxy: Option<String>,
    opts: &BuildOptions,
    progress: &mut OnProgress<'_>,
) -> Result<(), ImageError> {
    let tarball = dir.join("rootfs.tar");
    progress(Progress::Phase(Phase::Mmdebstrap));
    progress(Progress::Note(&format!(
        "mmdebstrap {SUITE} from {mirror} (unshare mode: no root needed)"
    )));
    let mut cmd = Command::new(mmdebstrap);
    cmd.args(["--mode=unshare", "--variant=minbase", "--format=tar"])
        .arg(format!("--include={}", PACKAGES.join(",")))
        .args(DPKG_FILTERS.iter().map(|rule| format!("--dpkgopt={rule}")))
        .arg(SUITE)
        .arg(&tarball)
        .arg(mirror)
        .env("TMPDIR", dir)
        .stdin(Stdio::null());
    if let Some(proxy) = &proxy {
        cmd.env("http_proxy", proxy).env("https_proxy", proxy);
    }
    stream::run(
        cmd,
        "mmdebstrap",
        "check that apt can reach the mirror (apt-get update), that your user has subordinate \
         ids in /etc/subuid and /etc/subgid (the ones rootless podman uses) and that newuidmap \
         is installed (apt-get install uidmap), or pass another mirror",
        progress,
    )
    .await?;
    progress(Progress::Phase(Phase::Import));
    progress(Progress::Note(&format!(
        "importing the rootfs as {}",
        opts.image
    )));
    let mut cmd = import_command(podman);
    cmd.arg(&tarball).arg(&opts.image).stdin(Stdio::null());
    stream::run(cmd, "podman import", "see podman's message above", progress).await
}

/// `podman import` with the image's settings, to be given the source and
/// the image name.
fn import_command(podman: &Podman) -> Command {
    let mut cmd = podman.command();
    cmd.args(["import", "--change", r#"CMD ["sleep", "infinity"]"#])
        .args(["--change", &format!("ENV PATH={CONTAINER_PATH}")])
        .args(["--change", "ENV LANG=C.UTF-8"])
        .args(["--change", "WORKDIR /work"])
        .args([
            "--change",
            &format!("LABEL {}={}", super::RECIPE_LABEL, super::recipe()),
        ]);
    cmd
}

/// `tar -C rootfs -c . | podman import --change … - image`.
async fn import(
    podman: &Podman,
    rootfs: &Path,
    image: &str,
    progress: &mut OnProgress<'_>,
) -> Result<(), ImageError> {
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(rootfs)
        .args(["--numeric-owner", "-c", "."])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ImageError::Io {
            what: "run tar",
            source,
        })?;
    let tar_out: Stdio = tar
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("tar started without a stdout pipe"))
        .and_then(TryInto::try_into)
        .map_err(|source| ImageError::Io {
            what: "connect tar to podman import",
            source,
        })?;
    let mut cmd = import_command(podman);
    cmd.args(["-", image]).stdin(tar_out);
    stream::run(cmd, "podman import", "see podman's message above", progress).await?;
    let status = tar.wait().await.map_err(|source| ImageError::Io {
        what: "wait for tar",
        source,
    })?;
    if !status.success() {
        return Err(ImageError::Step {
            step: "tar of the rootfs",
            output: format!("tar exited with {status}"),
            fix: "check free space in /var/tmp",
        });
    }
    Ok(())
}

/// Writes [`DPKG_FILTERS`] into the rootfs-to-be, for dpkg to apply to
/// every package it unpacks there, in the build and in images made from it.
fn write_dpkg_filters(rootfs: &Path) -> Result<(), ImageError> {
    let dir = rootfs.join("etc/dpkg/dpkg.cfg.d");
    let mut rules = DPKG_FILTERS.join("\n");
    rules.push('\n');
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("ah-slim"), rules))
        .map_err(|source| ImageError::Io {
            what: "write dpkg's path filters into the rootfs in /var/tmp",
            source,
        })
}

/// Removes from `rootfs` what [`DPKG_FILTERS`] exclude and do not include
/// again, and the folders that leaves empty: each exclusion names a folder
/// (`path-exclude=DIR/*`), whose files go unless an inclusion matches them.
/// Best effort: what stays only makes the image larger.
fn remove_filtered(rootfs: &Path) {
    let includes: Vec<&str> = DPKG_FILTERS
        .iter()
        .filter_map(|rule| rule.strip_prefix("path-include="))
        .collect();
    let folders = DPKG_FILTERS.iter().filter_map(|rule| {
        rule.strip_prefix("path-exclude=")?
            .strip_suffix("/*")?
            .strip_prefix('/')
    });
    for folder in folders {
        remove_unincluded(&rootfs.join(folder), &format!("/{folder}"), &includes);
    }
}

/// Removes what is in `dir` (`path` inside the rootfs) unless a pattern of
/// `includes` matches it; then the folders left empty.
fn remove_unincluded(dir: &Path, path: &str, includes: &[&str]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let inside = format!("{path}/{}", name.to_string_lossy());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_unincluded(&entry.path(), &inside, includes);
            let _ = std::fs::remove_dir(entry.path());
        } else if !includes.iter().any(|pattern| glob_match(pattern, &inside)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// dpkg's match of a filter's pattern: `*` stands for any text, `/` too.
fn glob_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => text.strip_prefix(head).is_some_and(|rest| {
            (0..=rest.len())
                .filter(|&at| rest.is_char_boundary(at))
                .any(|at| glob_match(tail, &rest[at..]))
        }),
    }
}

fn remove_files_in(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The first Debian mirror (not the security archive) in apt's sources,
/// one-line (`sources.list`, `*.list`) or deb822 (`*.sources`) format.
pub(super) fn host_mirror(apt_dir: &Path) -> String {
    let mut files: Vec<PathBuf> = vec![apt_dir.join("sources.list")];
    if let Ok(entries) = std::fs::read_dir(apt_dir.join("sources.list.d")) {
        let mut listed: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "list" || e == "sources"))
            .collect();
        listed.sort();
        files.extend(listed);
    }
    files
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|text| mirror_uris(&text))
        .find(|uri| !uri.contains("security"))
        .unwrap_or_else(|| FALLBACK_MIRROR.to_string())
}

/// URIs of `deb` entries that serve the image's suite.
fn mirror_uris(text: &str) -> Vec<String> {
    let mut uris = Vec::new();
    // deb822: stanzas separated by blank lines.
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| value.trim().to_string())
            })
        };
        if let (Some(types), Some(found), Some(suites)) =
            (field("Types"), field("URIs"), field("Suites"))
            && types.split_whitespace().any(|t| t == "deb")
            && suites.split_whitespace().any(|s| s == SUITE)
            && field("Enabled").is_none_or(|e| e != "no")
        {
            uris.extend(found.split_whitespace().map(str::to_string));
        }
    }
    // One-line: deb [options] uri suite components…
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("deb") {
            continue;
        }
        let mut rest: Vec<&str> = words.collect();
        if rest.first().is_some_and(|w| w.starts_with('[')) {
            let close = rest.iter().position(|w| w.ends_with(']')).unwrap_or(0);
            rest.drain(..=close);
        }
        if let [uri, suite, ..] = rest[..]
            && suite == SUITE
        {
            uris.push(uri.to_string());
        }
    }
    uris
}

/// apt's HTTP proxy (`Acquire::http::Proxy`), if one is configured.
async fn apt_proxy() -> Option<String> {
    let output = Command::new("apt-config").arg("dump").output().await.ok()?;
    parse_apt_proxy(&String::from_utf8_lossy(&output.stdout))
}

fn parse_apt_proxy(dump: &str) -> Option<String> {
    dump.lines().find_map(|line| {
        let value = line.strip_prefix("Acquire::http::Proxy ")?;
        let value = value.trim().trim_end_matches(';').trim_matches('"');
        (!value.is_empty() && !value.eq_ignore_ascii_case("DIRECT")).then(|| value.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_come_from_deb822_and_one_line_sources() {
        let deb822 = "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n\
                      Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n\
                      Suites: bookworm-security\n";
        assert_eq!(mirror_uris(deb822), ["http://mirror.example/debian"]);
        let one_line = "# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://proxy:3142/debian bookworm main\n\
                        deb-src http://src.example/debian bookworm main\ndeb http://old/debian bullseye main\n";
        assert_eq!(mirror_uris(one_line), ["http://proxy:3142/debian"]);
    }

    #[test]
    fn host_mirror_reads_the_apt_directory_and_falls_back() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        assert_eq!(host_mirror(dir.path()), FALLBACK_MIRROR);
        let list_d = dir.path().join("sources.list.d");
        std::fs::create_dir(&list_d).unwrap_or_else(|e| panic!("mkdir: {e}"));
        std::fs::write(
            list_d.join("x.list.disabled"),
            "deb http://no/debian bookworm main\n",
        )
        .unwrap_or_else(|e| panic!("write: {e}"));
        std::fs::write(
            list_d.join("debian.sources"),
            "Types: deb\nURIs: http://yes/debian\nSuites: bookworm\nComponents: main\n",
        )
        .unwrap_or_else(|e| panic!("write: {e}"));
        assert_eq!(host_mirror(dir.path()), "http://yes/debian");
    }

    #[test]
    fn every_exclusion_names_a_folder_the_cleanup_can_walk() {
        for rule in DPKG_FILTERS {
            let (kind, pattern) = rule.split_once('=').unwrap_or_default();
            match kind {
                "path-exclude" => assert!(
                    pattern.starts_with('/')
                        && pattern.ends_with("/*")
                        && pattern.matches('*').count() == 1,
                    "{rule}"
                ),
                "path-include" => assert!(pattern.starts_with('/'), "{rule}"),
                _ => panic!("not a dpkg path filter: {rule}"),
            }
        }
    }

    #[test]
    fn what_the_filters_exclude_is_removed_from_the_rootfs() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let root = dir.path();
        let files = [
            "usr/share/doc/git/copyright",
            "usr/share/doc/git/changelog.gz",
            "usr/share/doc/git/contrib/x.sh",
            "usr/share/man/man1/git.1.gz",
            "usr/share/locale/de/LC_MESSAGES/git.mo",
            "usr/share/locale/locale.alias",
            "usr/share/perl5/Error.pm",
            "usr/bin/git",
        ];
        for file in files {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap_or(root))
                .unwrap_or_else(|e| panic!("mkdir: {e}"));
            std::fs::write(&path, "x").unwrap_or_else(|e| panic!("write: {e}"));
        }
        std::os::unix::fs::symlink("git", root.join("usr/share/doc/git-man"))
            .unwrap_or_else(|e| panic!("symlink: {e}"));
        remove_filtered(root);
        let kept: Vec<&str> = files
            .into_iter()
            .filter(|file| root.join(file).exists())
            .collect();
        assert_eq!(
            kept,
            [
                "usr/share/doc/git/copyright",
                "usr/share/locale/locale.alias",
                "usr/share/perl5/Error.pm",
                "usr/bin/git"
            ]
        );
        assert!(!root.join("usr/share/doc/git-man").exists());
        assert!(
            !root.join("usr/share/man/man1").exists(),
            "emptied folders go"
        );
        assert!(
            root.join("usr/share/man").is_dir(),
            "the filtered folder stays"
        );
    }

    #[test]
    fn dpkg_patterns_match_across_slashes() {
        assert!(glob_match("/usr/share/doc/*", "/usr/share/doc/git/a/b"));
        assert!(glob_match(
            "/usr/share/doc/*/copyright",
            "/usr/share/doc/git/copyright"
        ));
        assert!(!glob_match(
            "/usr/share/doc/*/copyright",
            "/usr/share/doc/git/copyright.old"
        ));
        assert!(!glob_match(
            "/usr/share/locale/locale.alias",
            "/usr/share/locale/de"
        ));
    }

    #[test]
    fn apt_proxy_is_read_from_apt_config_dump() {
        assert_eq!(
            parse_apt_proxy("Acquire \"\";\nAcquire::http::Proxy \"http://10.0.0.1:3142\";\n"),
            Some("http://10.0.0.1:3142".to_string())
        );
        assert_eq!(parse_apt_proxy("Acquire::http::Proxy \"DIRECT\";\n"), None);
        assert_eq!(parse_apt_proxy("Acquire::Retries \"3\";\n"), None);
    }
}

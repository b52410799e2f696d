//! The `storage` line of `ah doctor`: which storage driver podman uses for
//! this user and what it costs a run. With `vfs` every container podman
//! creates starts with a copy of the whole image; ah's rootless runs and the
//! doctor's own probes stand on a copy made once per image instead (see
//! `podman::rootfs`), but every other container (`podman run` by hand) pays
//! it, and the copy takes room in the user's cache. The line says how to
//! switch to overlay storage; ah never changes the user's storage itself.

use super::Check;
use crate::podman::{Podman, rootfs};

/// The check's name.
pub(super) const NAME: &str = "storage";

/// Native overlay inside a user namespace needs Linux 5.13 or later.
const NATIVE_OVERLAY: (u32, u32) = (5, 13);

/// Names the driver and its cost per run; a warning on `vfs`. `missed`:
/// why the doctor's probes could not stand on the cached copy of the
/// image's root (the runs cannot either).
pub(super) async fn check(
    podman: &Podman,
    image: &str,
    rootless: bool,
    missed: Option<&str>,
) -> Check {
    let output = podman
        .command()
        .args(["info", "--format", "{{.Store.GraphDriverName}}"])
        .output()
        .await;
    let driver = match output {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Ok(out) => {
            return Check::fail(
                NAME,
                format!(
                    "podman info failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                "run 'podman info' and fix what it reports",
            )
            .warning();
        }
        Err(e) => {
            return Check::fail(
                NAME,
                format!("podman info could not run: {e}"),
                "reinstall podman",
            )
            .warning();
        }
    };
    if driver != "vfs" {
        return Check::pass(
            NAME,
            format!("{driver}: containers share the image's layers, a run's root costs no copy"),
        );
    }
    let size = match rootfs::inspect(podman, image).await {
        Ok(Some(facts)) => format!(" ({})", size_text(facts.size)),
        _ => String::new(),
    };
    let detail = format!(
        "vfs: podman copies the whole image{size} into every container it creates \
         (seconds each); {}",
        who_pays(rootless, missed)
    );
    Check::fail(
        NAME,
        detail,
        switch_fix(rootless, kernel_release().as_deref()),
    )
    .warning()
}

/// Which containers pay the copy on `vfs`: rootful, every run's; rootless,
/// only those not on ah's cached copy (`missed`: why it could not be made).
fn who_pays(rootless: bool, missed: Option<&str>) -> String {
    if !rootless {
        return "every run pays it before its first command".to_string();
    }
    let cache = rootfs::cache_root().map_or_else(
        || "the cache".to_string(),
        |path| path.display().to_string(),
    );
    match missed {
        None => format!(
            "ah's runs and these checks start on a copy of its root file system made once per \
             image in {cache} instead, but every other container pays it"
        ),
        Some(why) => format!(
            "ah's runs would start on a copy of its root file system made once per image in \
             {cache} instead, but it could not be made ({why}), so each run pays it too"
        ),
    }
}

/// How to move this user's storage to overlay.
fn switch_fix(rootless: bool, release: Option<&str>) -> String {
    let conf = if rootless {
        "~/.config/containers/storage.conf"
    } else {
        "/etc/containers/storage.conf"
    };
    let native = release
        .and_then(version)
        .is_some_and(|v| v >= NATIVE_OVERLAY);
    let how = if !rootless || native {
        format!("set driver = \"overlay\" under [storage] in {conf}")
    } else {
        format!(
            "install fuse-overlayfs (apt-get install fuse-overlayfs; this kernel is older than \
             5.13, which rootless native overlay needs) and in {conf} set driver = \"overlay\" \
             under [storage] and mount_program = \"/usr/bin/fuse-overlayfs\" under \
             [storage.options.overlay]"
        )
    };
    format!(
        "{how}, then 'podman system reset' (it deletes this user's images and containers) and \
         'ah image build' again; ah does not change podman's storage itself"
    )
}

/// The running kernel's release (`6.1.0-18-amd64`).
fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|text| text.trim().to_string())
}

/// `(major, minor)` of a kernel release.
fn version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// `1.09 GB`, `590 MB`: sizes as podman shows them.
fn size_text(bytes: u64) -> String {
    const GB: u64 = 1_000_000_000;
    const MB: u64 = 1_000_000;
    if bytes >= GB {
        format!("{:.2} GB", bytes as f64 / GB as f64)
    } else {
        format!("{} MB", bytes.div_ceil(MB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fix_fits_the_kernel_and_the_user() {
        let native = switch_fix(true, Some("6.1.0-18-amd64"));
        assert!(
            native.contains("~/.config/containers/storage.conf"),
            "{native}"
        );
        assert!(!native.contains("fuse-overlayfs"), "{native}");
        assert!(native.contains("podman system reset"), "{native}");
        let old = switch_fix(true, Some("5.10.0-28-amd64"));
        assert!(
            old.contains("mount_program = \"/usr/bin/fuse-overlayfs\""),
            "{old}"
        );
        let unknown = switch_fix(true, None);
        assert!(unknown.contains("fuse-overlayfs"), "{unknown}");
        let root = switch_fix(false, Some("5.10"));
        assert!(root.contains("/etc/containers/storage.conf"), "{root}");
        assert!(!root.contains("fuse-overlayfs"), "{root}");
    }

    #[test]
    fn on_vfs_the_line_says_who_pays_the_copy() {
        assert!(who_pays(false, None).contains("every run pays it"));
        let copied = who_pays(true, None);
        assert!(
            copied.contains("runs and these checks start on a copy"),
            "{copied}"
        );
        let missed = who_pays(true, Some("no room"));
        assert!(
            missed.contains("could not be made (no room), so each run pays it too"),
            "{missed}"
        );
    }

    #[test]
    fn versions_and_sizes_read_as_people_write_them() {
        assert_eq!(version("5.13.0"), Some((5, 13)));
        assert_eq!(version("6.18.44-fc-v782"), Some((6, 18)));
        assert_eq!(version("junk"), None);
        assert_eq!(size_text(1_090_000_000), "1.09 GB");
        assert_eq!(size_text(589_500_000), "590 MB");
    }
}

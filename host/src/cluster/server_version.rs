//! The Kubernetes versions the host works with, checked against the API server at start.
//!
//! The host is built on kube 5 and k8s-openapi 0.29, which kube-rs tests against Kubernetes
//! 1.33 (its minimum supported version) to 1.37, and its own tests run on 1.33 and 1.37. An
//! older server is refused at start with one line naming its version and the oldest supported.
//! A newer one is accepted: every object the host reads or writes is of a stable kind
//! (`apps/v1`, `coordination.k8s.io/v1` Leases, `events.k8s.io/v1`,
//! `apiextensions.k8s.io/v1`, `admissionregistration.k8s.io/v1`), written by server-side apply.

use k8s_openapi::apimachinery::pkg::version::Info;

/// The oldest Kubernetes minor version the host supports (and the one its tests run on).
pub const OLDEST_SUPPORTED: (u32, u32) = (1, 33);

/// Why the API server's version is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The server is older than [`OLDEST_SUPPORTED`].
    #[error(
        "the API server runs Kubernetes {found}, older than 1.{}, the oldest wasmop supports (the range it is tested on is 1.33 to 1.37)",
        OLDEST_SUPPORTED.1
    )]
    TooOld {
        /// `major.minor` as the server reported it.
        found: String,
    },
    /// The server's version does not parse as numbers.
    #[error("the API server reports an unreadable version (major {major:?}, minor {minor:?})")]
    Unreadable {
        /// `major` as reported.
        major: String,
        /// `minor` as reported.
        minor: String,
    },
}

/// Check the version an API server reports. Providers' minor versions with a suffix
/// (`"27+"` on GKE and EKS) count as their number.
///
/// ```
/// use k8s_openapi::apimachinery::pkg::version::Info;
/// use wasmop::cluster::server_version::check;
/// let info = |major: &str, minor: &str| Info { major: major.into(), minor: minor.into(), ..Default::default() };
/// assert!(check(&info("1", "33")).is_ok());
/// assert!(check(&info("1", "35+")).is_ok());
/// assert!(check(&info("1", "32")).is_err());
/// ```
///
/// # Errors
/// [`VersionError`] when the server is too old or its version unreadable.
pub fn check(info: &Info) -> Result<(u32, u32), VersionError> {
    let Some((major, minor)) = major_minor(info) else {
        return Err(VersionError::Unreadable { major: info.major.clone(), minor: info.minor.clone() });
    };
    if (major, minor) < OLDEST_SUPPORTED {
        return Err(VersionError::TooOld { found: format!("{major}.{minor}") });
    }
    Ok((major, minor))
}

/// `(major, minor)` as a server reports them; providers' minor versions with a suffix (`"27+"`)
/// count as their number. `None` when either is not a number.
pub fn major_minor(info: &Info) -> Option<(u32, u32)> {
    let number = |s: &str| s.trim_end_matches('+').parse::<u32>().ok();
    Some((number(&info.major)?, number(&info.minor)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str) -> Info {
        Info { major: major.into(), minor: minor.into(), git_version: format!("v{major}.{minor}.0"), ..Default::default() }
    }

    #[test]
    fn versions_from_1_33_on_are_accepted() {
        assert_eq!(check(&info("1", "33")), Ok((1, 33)));
        assert_eq!(check(&info("1", "37+")), Ok((1, 37)));
        assert_eq!(check(&info("2", "0")), Ok((2, 0)));
    }

    #[test]
    fn older_servers_are_refused_with_the_reason() {
        let err = check(&info("1", "32")).unwrap_err();
        assert_eq!(err, VersionError::TooOld { found: "1.32".into() });
        assert!(err.to_string().contains("Kubernetes 1.32, older than 1.33"), "{err}");
        assert!(check(&info("1", "20")).is_err());
    }

    #[test]
    fn unreadable_versions_are_refused() {
        assert!(matches!(check(&info("1", "")), Err(VersionError::Unreadable { .. })));
        assert!(matches!(check(&info("one", "20")), Err(VersionError::Unreadable { .. })));
    }
}

//! How a watch makes its initial list: one LIST response holding every object, or a streaming
//! list (WatchList: the objects arrive one by one as watch events, then a bookmark), which does
//! not hold the whole list in memory at once.
//!
//! Kubernetes serves streaming lists where its `WatchList` feature gate is on: by default in
//! 1.32, off again in 1.33, on from 1.34. A server that does not serve them refuses a watch that
//! asks for one, so [`InitialList::Auto`] asks the server for its version once and streams only
//! where it is on by default.

use k8s_openapi::apimachinery::pkg::version::Info;
use kube::runtime::watcher;

use crate::cluster::server_version::major_minor;

/// The initial list of every watch of the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InitialList {
    /// Streaming lists where the server serves them by default, else one LIST (the default).
    #[default]
    Auto,
    /// Always one LIST response (paged by the server).
    Paged,
    /// Always streaming lists (a server without them refuses every watch).
    Streaming,
}

impl InitialList {
    /// Whether a server reporting `info` serves streaming lists by default.
    ///
    /// ```
    /// use k8s_openapi::apimachinery::pkg::version::Info;
    /// use wasmop::watch::InitialList;
    /// let info = |minor: &str| Info { major: "1".into(), minor: minor.into(), ..Default::default() };
    /// assert!(!InitialList::served_by(&info("33")));
    /// assert!(InitialList::served_by(&info("34")));
    /// assert!(InitialList::served_by(&info("37+")));
    /// ```
    pub fn served_by(info: &Info) -> bool {
        match major_minor(info) {
            Some((1, minor)) => minor == 32 || minor >= 34,
            Some((major, _)) => major > 1,
            None => false,
        }
    }
}

/// [`InitialList`] resolved against one server, once.
pub(crate) struct ListMode {
    choice: InitialList,
    client: kube::Client,
    streaming: tokio::sync::OnceCell<bool>,
}

impl std::fmt::Debug for ListMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListMode").field("choice", &self.choice).field("streaming", &self.streaming.get()).finish()
    }
}

impl ListMode {
    pub(crate) fn new(choice: InitialList, client: kube::Client) -> Self {
        Self { choice, client, streaming: tokio::sync::OnceCell::new() }
    }

    /// Whether watches stream their initial list. `Auto` asks the server's version the first
    /// time; while the server cannot be asked, watches list (and the next watch asks again).
    pub(crate) async fn streaming(&self) -> bool {
        match self.choice {
            InitialList::Paged => false,
            InitialList::Streaming => true,
            InitialList::Auto => self
                .streaming
                .get_or_try_init(|| async {
                    let info = self.client.apiserver_version().await?;
                    let streaming = InitialList::served_by(&info);
                    tracing::info!(kubernetes = %info.git_version, streaming, "initial lists of watches");
                    Ok::<_, kube::Error>(streaming)
                })
                .await
                .copied()
                .unwrap_or(false),
        }
    }

    /// `config` with a streaming initial list when [`ListMode::streaming`].
    pub(crate) async fn apply(&self, config: watcher::Config) -> watcher::Config {
        if self.streaming().await { config.streaming_lists() } else { config }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str) -> Info {
        Info { major: major.into(), minor: minor.into(), ..Default::default() }
    }

    #[test]
    fn streaming_lists_are_used_where_the_server_turns_them_on_by_default() {
        assert!(!InitialList::served_by(&info("1", "31")));
        assert!(InitialList::served_by(&info("1", "32")));
        assert!(!InitialList::served_by(&info("1", "33")), "1.33 turned WatchList off by default again");
        assert!(InitialList::served_by(&info("1", "34")));
        assert!(InitialList::served_by(&info("1", "37+")));
        assert!(!InitialList::served_by(&info("1", "")), "an unreadable version lists");
    }
}

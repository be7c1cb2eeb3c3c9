//! What the host asks the cluster itself, below every layer that writes to it: the API
//! server's version ([`server_version`]) and which kinds it serves, under which resource name
//! and scope ([`discovery`]); and where the host works in it ([`install_scope`]).

pub mod discovery;
pub mod install_scope;
pub mod server_version;

pub use discovery::{DeclaredKinds, Discovery, DiscoveryError, Resolved};
pub use install_scope::{InstallScope, NamespaceError};

//! The reconcile path against a mock API server (`tower_test`): every request the host sends is
//! checked (method, path, query, body) and answered with canned JSON, without a control plane.

#[path = "mock/finalizer.rs"]
mod finalizer;
#[path = "mock/reconcile.rs"]
mod reconcile;
#[path = "mock/server.rs"]
mod server;
#[path = "mock/watches.rs"]
mod watches;
#[path = "mock/writer.rs"]
mod writer;

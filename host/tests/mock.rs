//! The reconcile path against a mock API server (`tower_test`): every request the host sends is
//! checked (method, path, query, body) and answered with canned JSON, without a control plane.

#[path = "mock/server.rs"]
mod server;
#[path = "mock/writer.rs"]
mod writer;

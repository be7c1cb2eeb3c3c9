//! [`Allowances`]: what the runtime enforces on each plugin — its [`Limits`] and [`Grants`] —
//! taken from the host's policy. Plain data: the runtime sees these, never the whole policy
//! (breaker settings and removal are the controller's).

use std::collections::BTreeMap;

use super::{Grants, Limits};

/// The limits and grants of one plugin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Allowance {
    /// Per-call limits.
    pub limits: Limits,
    /// Capabilities beyond the manifest.
    pub grants: Grants,
}

/// The [`Allowance`] of every plugin by name, and the default for plugins without one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Allowances {
    defaults: Allowance,
    plugins: BTreeMap<String, Allowance>,
}

impl Allowances {
    /// Every plugin under `limits`, no grants.
    pub fn uniform(limits: Limits) -> Self {
        Self { defaults: Allowance { limits, grants: Grants::default() }, plugins: BTreeMap::new() }
    }

    /// `defaults`, and `plugins` by name.
    pub fn new(defaults: Allowance, plugins: BTreeMap<String, Allowance>) -> Self {
        Self { defaults, plugins }
    }

    /// The allowance of the plugin named `name`.
    pub fn for_plugin(&self, name: &str) -> &Allowance {
        self.plugins.get(name).unwrap_or(&self.defaults)
    }

    /// The allowance of plugins without an entry of their own.
    pub fn defaults(&self) -> &Allowance {
        &self.defaults
    }

    /// Whether any plugin is metered with fuel (the engine then counts it for all).
    pub fn uses_fuel(&self) -> bool {
        self.plugins.values().chain([&self.defaults]).any(|a| a.limits.fuel.is_some())
    }
}

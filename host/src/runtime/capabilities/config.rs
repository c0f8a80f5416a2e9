//! `emseepea:inventory/config`: the static `[config]` table of the source's
//! manifest. The only configuration a guest sees (its environment is empty).

use crate::runtime::bindings::emseepea::inventory::config::Host;
use crate::runtime::host_state::HostState;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
pub struct ConfigValues(Arc<BTreeMap<String, String>>);

impl ConfigValues {
    pub fn new(values: BTreeMap<String, String>) -> Self {
        Self(Arc::new(values))
    }
}

impl Host for HostState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.capabilities.config.0.get(&key).cloned())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_are_shared_not_copied() {
        let v = super::ConfigValues::new([("a".to_string(), "1".to_string())].into());
        let w = v.clone();
        assert!(std::sync::Arc::ptr_eq(&v.0, &w.0));
    }
}

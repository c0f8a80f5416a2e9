//! Host bindings for the `emseepea:inventory` WIT package (`wit/inventory.wit`).
wasmtime::component::bindgen!({
    world: "inventory-source",
    path: "../wit",
    imports: { default: async | trappable },
    exports: { default: async },
    with: {
        "emseepea:inventory/sql.connection": crate::runtime::capabilities::sql::Connection,
    },
});

//! The Kubernetes recipe (deploy/kubernetes) is safe by default.
//!
//! - checkov, a standard infrastructure-as-code linter (PyPI, pinned in
//!   deploy/lint/requirements.txt, installed by `cargo xtask clients` into
//!   target/clients/deploy-lint), passes on the manifests with no check
//!   skipped, and fails on a copy with the hardening taken out, naming each
//!   missing piece.
//! - The rules no generic linter knows are checked here on the parsed
//!   manifests, each with an obeyed/violated pair: every container
//!   hardened (a container another change adds included), the
//!   NetworkPolicy admitting only the ingress controller to MCP and only
//!   monitoring to admin, the memory limit at least the bound computed from
//!   the ConfigMap's numbers, the state directory one the server makes
//!   itself inside its volume, a per-peer cap below the global one, the
//!   ConfigMap a config the server loads.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn manifests_dir() -> PathBuf {
    root().join("deploy/kubernetes")
}

/// The linter's virtualenv; missing: the test fails and says how to install.
fn venv_bin(name: &str) -> PathBuf {
    let bin = root().join("target/clients/deploy-lint/bin").join(name);
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo xtask clients` (it installs deploy/lint/requirements.txt)",
        bin.display()
    );
    bin
}

/// Every YAML document of every manifest in `dir`, as JSON (PyYAML, which
/// the linter's environment has, parses them).
fn documents(dir: &Path) -> Vec<Value> {
    let out = Command::new(venv_bin("python"))
        .arg("-c")
        .arg(
            "import glob, json, os, sys, yaml\n\
             docs = []\n\
             for f in sorted(glob.glob(os.path.join(sys.argv[1], '*.yaml'))):\n\
             \x20   docs += [d for d in yaml.safe_load_all(open(f)) if d]\n\
             print(json.dumps(docs))",
        )
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Write `docs` as one manifest per object (JSON is YAML) into a new directory.
fn write_documents(docs: &[Value]) -> tempfile::TempDir {
    // Not tempfile's default ".tmp…": checkov skips hidden directories.
    let dir = tempfile::Builder::new()
        .prefix("deploy-lint-")
        .tempdir()
        .unwrap();
    for (i, d) in docs.iter().enumerate() {
        std::fs::write(
            dir.path().join(format!("{i:02}.yaml")),
            serde_json::to_string_pretty(d).unwrap(),
        )
        .unwrap();
    }
    dir
}

/// Run checkov's Kubernetes checks on `dir`: (passed, output).
fn checkov(dir: &Path) -> (bool, String) {
    let out = Command::new(venv_bin("checkov"))
        .args([
            "--directory",
            dir.to_str().unwrap(),
            "--framework",
            "kubernetes",
            "--compact",
            "--quiet",
            // Offline: no guideline download, no version check.
            "--skip-download",
        ])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Something was scanned: a directory checkov skips passes silently.
    assert!(
        text.contains("kubernetes scan results") && text.contains("Passed checks:"),
        "checkov scanned nothing in {}:\n{text}",
        dir.display()
    );
    (out.status.success(), text)
}

// ------------------------------------------------------------ the manifests

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let all = of_kind(docs, kind);
    assert_eq!(all.len(), 1, "exactly one {kind}");
    all[0]
}

fn one_mut<'a>(docs: &'a mut [Value], kind: &str) -> &'a mut Value {
    docs.iter_mut().find(|d| d["kind"] == kind).unwrap()
}

/// The server's config, from the ConfigMap.
fn config_text(docs: &[Value]) -> String {
    one(docs, "ConfigMap")["data"]["emseepea.toml"]
        .as_str()
        .expect("the ConfigMap has emseepea.toml")
        .to_owned()
}

fn config(docs: &[Value]) -> toml::Table {
    config_text(docs).parse().unwrap()
}

fn int(t: &toml::Table, section: &str, key: &str, default: i64) -> u64 {
    t.get(section)
        .and_then(|s| s.get(key))
        .map_or(default, |v| v.as_integer().unwrap()) as u64
}

/// A Kubernetes quantity in bytes ("2Gi", "1856Mi", "2147483648").
fn bytes(q: &str) -> u64 {
    for (suffix, unit) in [("Ki", 1u64 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)] {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<u64>().unwrap() * unit;
        }
    }
    q.parse().unwrap_or_else(|_| panic!("quantity {q}"))
}

// ------------------------------------------------------------ the rules

/// What each container (and init container) and the pod must carry.
fn hardening_problems(docs: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let pod = &one(docs, "Deployment")["spec"]["template"]["spec"];
    if pod["automountServiceAccountToken"] != false {
        problems.push("pod: automountServiceAccountToken is not false".to_owned());
    }
    let pod_sc = &pod["securityContext"];
    let containers = pod["containers"]
        .as_array()
        .into_iter()
        .chain(pod["initContainers"].as_array())
        .flatten();
    for c in containers {
        let name = c["name"].as_str().unwrap_or("?");
        let sc = &c["securityContext"];
        // A container's own setting, else the pod's.
        let get = |path: &[&str]| {
            let pick = |mut v: &Value| {
                for p in path {
                    v = &v[*p];
                }
                v.clone()
            };
            let own = pick(sc);
            if own.is_null() { pick(pod_sc) } else { own }
        };
        let mut need = |ok: bool, what: &str| {
            if !ok {
                problems.push(format!("{name}: {what}"));
            }
        };
        need(
            sc["allowPrivilegeEscalation"] == false,
            "allowPrivilegeEscalation is not false",
        );
        need(
            sc["readOnlyRootFilesystem"] == true,
            "readOnlyRootFilesystem is not true",
        );
        need(sc["privileged"] != true, "privileged");
        need(
            sc["capabilities"]["drop"]
                .as_array()
                .is_some_and(|d| d.iter().any(|c| c == "ALL")),
            "capabilities.drop lacks ALL",
        );
        need(
            sc["capabilities"]["add"]
                .as_array()
                .is_none_or(|a| a.is_empty()),
            "capabilities.add is not empty",
        );
        need(
            get(&["seccompProfile", "type"]) == "RuntimeDefault",
            "seccompProfile is not RuntimeDefault",
        );
        need(get(&["runAsNonRoot"]) == true, "runAsNonRoot is not true");
        need(
            get(&["runAsUser"]).as_u64().is_some_and(|u| u >= 10000),
            "runAsUser is not a fixed uid >= 10000",
        );
    }
    problems
}

/// The NetworkPolicy: both ports listed, each only from its namespace.
fn network_problems(docs: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let template = &one(docs, "Deployment")["spec"]["template"];
    let labels = template["metadata"]["labels"].as_object().unwrap();
    let selects_pods = |p: &&Value| {
        p["spec"]["podSelector"]["matchLabels"]
            .as_object()
            .is_some_and(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)))
            && p["spec"]["policyTypes"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t == "Ingress"))
    };
    let policies: Vec<&Value> = of_kind(docs, "NetworkPolicy")
        .into_iter()
        .filter(selects_pods)
        .collect();
    if policies.is_empty() {
        return vec!["no NetworkPolicy of type Ingress selects the pods".to_owned()];
    }
    let rules: Vec<&Value> = policies
        .iter()
        .flat_map(|p| p["spec"]["ingress"].as_array().into_iter().flatten())
        .collect();
    for rule in &rules {
        let from = rule["from"].as_array();
        if from.is_none_or(|f| f.is_empty()) {
            problems.push("a rule admits every source (no from)".to_owned());
        }
        if from
            .into_iter()
            .flatten()
            .any(|f| !f["ipBlock"].is_null() || f["namespaceSelector"] == json!({}))
        {
            problems.push("a rule admits by address or from every namespace".to_owned());
        }
        if rule["ports"].as_array().is_none_or(|p| p.is_empty()) {
            problems.push("a rule admits every port".to_owned());
        }
    }
    let containers = template["spec"]["containers"].as_array().unwrap();
    let ports: Vec<&Value> = containers
        .iter()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .collect();
    // Each port of the pod: the namespaces admitted to it.
    let admitted = |port: &Value| -> Vec<String> {
        rules
            .iter()
            .filter(|r| {
                r["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["port"] == port["name"] || p["port"] == port["containerPort"])
            })
            .flat_map(|r| r["from"].as_array().into_iter().flatten())
            .map(|f| {
                f["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                    .as_str()
                    .unwrap_or("(any)")
                    .to_owned()
            })
            .collect()
    };
    for port in ports {
        let name = port["name"].as_str().unwrap_or("?");
        let want = match name {
            "mcp" => "ingress-nginx",
            "admin" => "monitoring",
            other => {
                problems.push(format!("port {other}: no rule says who may reach it"));
                continue;
            }
        };
        let from = admitted(port);
        if from.is_empty() {
            problems.push(format!("port {name}: not in the NetworkPolicy"));
        } else if from.iter().any(|ns| ns != want) {
            problems.push(format!(
                "port {name}: admitted from {from:?}, only {want} may"
            ));
        }
    }
    problems
}

/// The bound, in bytes, the memory limit must cover (deployment.yaml's
/// comment shows the same sum).
const HOST_OWN_BYTES: u64 = 256 << 20;
const SQLITE_HEAP_BASE_BYTES: u64 = 64 << 20;

fn memory_bound(docs: &[Value]) -> u64 {
    let t = config(docs);
    let calls = int(&t, "runtime", "max_concurrent_calls", 64);
    let standby = int(&t, "runtime", "standby_instances", 4);
    let per_call = int(&t, "runtime", "max_memory_bytes", 512 << 20);
    let connections = int(&t, "http", "max_connections", 512);
    let body = int(&t, "http", "max_body_bytes", 1 << 20);
    (calls + standby) * per_call + connections * body + SQLITE_HEAP_BASE_BYTES + HOST_OWN_BYTES
}

fn memory_problems(docs: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let c = &one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let resources = &c["resources"];
    let limit = resources["limits"]["memory"].as_str().map(bytes);
    let request = resources["requests"]["memory"].as_str().map(bytes);
    let bound = memory_bound(docs);
    match limit {
        None => problems.push("no memory limit".to_owned()),
        Some(l) if l < bound => problems.push(format!(
            "memory limit {} MiB below the bound {} MiB",
            l >> 20,
            bound >> 20
        )),
        Some(_) => {}
    }
    if request != limit {
        problems.push("memory request differs from the limit".to_owned());
    }
    problems
}

fn state_problems(docs: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let pod = &one(docs, "Deployment")["spec"]["template"]["spec"];
    let state_dir = PathBuf::from(config(docs)["state_dir"].as_str().unwrap());
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    let mount = mounts
        .iter()
        .filter(|m| state_dir.starts_with(m["mountPath"].as_str().unwrap()))
        .max_by_key(|m| m["mountPath"].as_str().unwrap().len());
    let Some(mount) = mount else {
        return vec![format!("state_dir {} is on no volume", state_dir.display())];
    };
    if state_dir == Path::new(mount["mountPath"].as_str().unwrap()) {
        problems.push(format!(
            "state_dir {} is the volume's root (kubelet-owned, refused by the owner check): use a subdirectory",
            state_dir.display()
        ));
    }
    if mount["readOnly"] == true {
        problems.push("the state volume is read-only".to_owned());
    }
    problems
}

fn connection_problems(docs: &[Value]) -> Vec<String> {
    let t = config(docs);
    let max = int(&t, "http", "max_connections", 512);
    let per_peer = int(&t, "http", "max_connections_per_peer", 256);
    let mut problems = Vec::new();
    if per_peer * 2 > max {
        problems.push(format!(
            "max_connections_per_peer {per_peer} over half of max_connections {max}: one ingress controller pod could hold every connection"
        ));
    }
    let body = int(&t, "http", "max_body_bytes", 1 << 20);
    let ingress = one(docs, "Ingress")["metadata"]["annotations"]
        ["nginx.ingress.kubernetes.io/proxy-body-size"]
        .as_str()
        .map(|s| bytes(&s.replace('k', "Ki").replace('m', "Mi")));
    if ingress != Some(body) {
        problems.push(format!(
            "the Ingress's proxy-body-size {ingress:?} is not max_body_bytes {body}"
        ));
    }
    problems
}

fn all_problems(docs: &[Value]) -> Vec<String> {
    let mut p = hardening_problems(docs);
    p.extend(network_problems(docs));
    p.extend(memory_problems(docs));
    p.extend(state_problems(docs));
    p.extend(connection_problems(docs));
    p
}

// ------------------------------------------------------------ the tests

#[test]
fn the_kubernetes_manifests_pass_checkov() {
    let (ok, out) = checkov(&manifests_dir());
    assert!(ok, "checkov failed on deploy/kubernetes:\n{out}");
    assert!(out.contains("Failed checks: 0"), "{out}");
    assert!(out.contains("Skipped checks: 0"), "{out}");
}

/// The manifests as they were before: no container securityContext, a
/// service account token, no seccomp profile, no NetworkPolicy.
fn unhardened(docs: &[Value]) -> Vec<Value> {
    let mut docs: Vec<Value> = docs
        .iter()
        .filter(|d| d["kind"] != "NetworkPolicy")
        .cloned()
        .collect();
    let pod = &mut one_mut(&mut docs, "Deployment")["spec"]["template"]["spec"];
    pod.as_object_mut()
        .unwrap()
        .remove("automountServiceAccountToken");
    pod["securityContext"]
        .as_object_mut()
        .unwrap()
        .remove("seccompProfile");
    pod["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("securityContext");
    docs
}

#[test]
fn checkov_fails_an_unhardened_manifest_naming_each_gap() {
    let docs = documents(&manifests_dir());
    let dir = write_documents(&unhardened(&docs));
    let (ok, out) = checkov(dir.path());
    assert!(!ok, "checkov passed an unhardened manifest:\n{out}");
    for check in [
        "CKV_K8S_20", // allowPrivilegeEscalation
        "CKV_K8S_22", // readOnlyRootFilesystem
        "CKV_K8S_28", // NET_RAW (capabilities.drop ALL)
        "CKV_K8S_31", // seccomp RuntimeDefault
        "CKV_K8S_38", // service account token
        "CKV2_K8S_6", // no NetworkPolicy
    ] {
        assert!(out.contains(check), "{check} not reported:\n{out}");
    }
    // The copy itself is sound: the same documents, hardened, pass.
    let dir = write_documents(&docs);
    let (ok, out) = checkov(dir.path());
    assert!(ok, "the JSON copy of the manifests fails:\n{out}");
}

#[test]
fn the_project_rules_hold_for_the_manifests() {
    let docs = documents(&manifests_dir());
    assert_eq!(all_problems(&docs), Vec::<String>::new());
    // The bound as deployment.yaml's comment adds it up: 1856 MiB.
    assert_eq!(memory_bound(&docs) >> 20, 1856);
}

#[test]
fn the_project_rules_refuse_each_gap() {
    let docs = documents(&manifests_dir());
    let refused = |what: &str, change: &dyn Fn(&mut Vec<Value>), expect: &str| {
        let mut d = docs.clone();
        change(&mut d);
        let problems = all_problems(&d);
        assert!(
            problems.iter().any(|p| p.contains(expect)),
            "{what}: expected a problem with {expect:?}, got {problems:?}"
        );
    };
    refused(
        "unhardened",
        &|d| *d = unhardened(d),
        "allowPrivilegeEscalation",
    );
    refused(
        "an init container added without hardening",
        &|d| {
            let pod = &mut one_mut(d, "Deployment")["spec"]["template"]["spec"];
            pod["initContainers"] = json!([{"name": "fetch", "image": "x"}]);
        },
        "fetch: readOnlyRootFilesystem",
    );
    refused(
        "a capability added",
        &|d| {
            let c = &mut one_mut(d, "Deployment")["spec"]["template"]["spec"]["containers"][0];
            c["securityContext"]["capabilities"]["add"] = json!(["NET_ADMIN"]);
        },
        "capabilities.add",
    );
    refused(
        "the token mounted",
        &|d| {
            one_mut(d, "Deployment")["spec"]["template"]["spec"]["automountServiceAccountToken"] =
                json!(true)
        },
        "automountServiceAccountToken",
    );
    refused(
        "no NetworkPolicy",
        &|d| d.retain(|x| x["kind"] != "NetworkPolicy"),
        "no NetworkPolicy",
    );
    refused(
        "admin open to every namespace",
        &|d| {
            let rules = &mut one_mut(d, "NetworkPolicy")["spec"]["ingress"];
            rules[1]["from"] = json!([{"namespaceSelector": {}}]);
        },
        "every namespace",
    );
    refused(
        "admin reachable from the ingress controller",
        &|d| {
            let rules = &mut one_mut(d, "NetworkPolicy")["spec"]["ingress"];
            rules[0]["ports"]
                .as_array_mut()
                .unwrap()
                .push(json!({"port": "admin"}));
        },
        "port admin: admitted from",
    );
    refused(
        "the admin port left out",
        &|d| {
            let rules = &mut one_mut(d, "NetworkPolicy")["spec"]["ingress"];
            rules.as_array_mut().unwrap().pop();
        },
        "port admin: not in the NetworkPolicy",
    );
    refused(
        "a memory limit under the bound",
        &|d| {
            let c = &mut one_mut(d, "Deployment")["spec"]["template"]["spec"]["containers"][0];
            c["resources"]["limits"]["memory"] = json!("1Gi");
            c["resources"]["requests"]["memory"] = json!("1Gi");
        },
        "below the bound",
    );
    refused(
        "more calls at once than the limit pays for",
        &|d| {
            let cm = one_mut(d, "ConfigMap");
            let text = cm["data"]["emseepea.toml"]
                .as_str()
                .unwrap()
                .replace("max_concurrent_calls = 16", "max_concurrent_calls = 64");
            cm["data"]["emseepea.toml"] = json!(text);
        },
        "below the bound",
    );
    refused(
        "the state directory at the volume's root",
        &|d| {
            let cm = one_mut(d, "ConfigMap");
            let text = cm["data"]["emseepea.toml"]
                .as_str()
                .unwrap()
                .replace("state_dir = \"/state/emseepea\"", "state_dir = \"/state\"");
            cm["data"]["emseepea.toml"] = json!(text);
        },
        "the volume's root",
    );
    refused(
        "the per-peer cap equal to the global one",
        &|d| {
            let cm = one_mut(d, "ConfigMap");
            let text = cm["data"]["emseepea.toml"].as_str().unwrap().replace(
                "max_connections_per_peer = 512",
                "max_connections_per_peer = 1024",
            );
            cm["data"]["emseepea.toml"] = json!(text);
        },
        "max_connections_per_peer",
    );
}

/// The ConfigMap is a config this server loads (no unknown or misspelled
/// key, every bound in range).
#[test]
fn the_config_map_is_a_valid_config() {
    let docs = documents(&manifests_dir());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("emseepea.toml");
    std::fs::write(&file, config_text(&docs)).unwrap();
    let c = emseepea::config::Config::load(&file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.http.peer_ipv6_prefix, 128);
    assert_eq!(c.state_dir, Path::new("/state/emseepea"));
}

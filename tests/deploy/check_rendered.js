#!/usr/bin/env node
// trainlet's own expectations of the rendered kustomize output, on top of schema validation:
//
//   node check_rendered.js SOURCE_DIR BASE.yaml GPU.yaml KEYS_DIR [HA.yaml]
//
// SOURCE_DIR is the repository root (for deploy/runtimes and the manifests' comments), KEYS_DIR
// the keys make-keys wrote for this render. Prints each failed expectation; exits 1 on any.
"use strict";

const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

const [src, basePath, gpuPath, keysDir, haPath] = process.argv.slice(2);
const failures = [];
const expect = (ok, what) => { if (!ok) failures.push(what); };

const load = (p) => YAML.parseAllDocuments(fs.readFileSync(p, "utf8"))
                        .map((d) => d.toJS()).filter((d) => d);
const base = load(basePath);
const gpu = load(gpuPath);
const find = (docs, kind, prefix) =>
    docs.find((d) => d.kind === kind && d.metadata.name.startsWith(prefix));
const b64 = (s) => Buffer.from(String(s).replace(/[\r\n]/g, ""), "base64").toString("utf8");

// Objects and namespace.
for (const [kind, name] of [["Namespace", "trainlet"], ["Deployment", "trainlet-coordinator"],
                            ["PersistentVolumeClaim", "trainlet-coordinator-state"],
                            ["Service", "trainlet-coordinator"],
                            ["PodDisruptionBudget", "trainlet-coordinator"],
                            ["DaemonSet", "trainlet-agent"], ["ConfigMap", "trainlet-runtimes"],
                            ["Secret", "trainlet-coordinator-key"],
                            ["Secret", "trainlet-coordinator-public"],
                            ["Secret", "trainlet-allowlists"], ["Secret", "trainlet-agent-keys"]]) {
  expect(find(base, kind, name), `base has ${kind} ${name}`);
}
for (const d of base) {
  if (d.kind !== "Namespace") {
    expect(d.metadata.namespace === "trainlet", `${d.kind}/${d.metadata.name} is in namespace trainlet`);
  }
}

const containerOf = (w) => w.spec.template.spec.containers[0];
const portOf = (c, name) => (c.ports || []).find((p) => p.name === name);
const checkProbes = (c, who, port) => {
  expect(c.livenessProbe && c.livenessProbe.httpGet.path === "/healthz", `${who} liveness on /healthz`);
  expect(c.readinessProbe && c.readinessProbe.httpGet.path === "/readyz", `${who} readiness on /readyz`);
  for (const p of [c.livenessProbe, c.readinessProbe]) {
    const named = p && portOf(c, p.httpGet.port);
    expect(named && named.containerPort === port, `${who} probes the metrics port ${port}`);
  }
  expect(c.resources && c.resources.requests && c.resources.requests.cpu &&
         c.resources.requests.memory, `${who} has cpu and memory requests`);
  const addr = (c.args || []).find((a) => a.startsWith("--metrics-address="));
  expect(addr && addr.endsWith(`:${port}`), `${who} serves metrics on port ${port}`);
};

// Coordinator.
const dep = find(base, "Deployment", "trainlet-coordinator");
if (dep) {
  expect(dep.spec.replicas === 1, "coordinator has 1 replica");
  expect(dep.spec.strategy && dep.spec.strategy.type === "Recreate", "coordinator uses Recreate");
  const c = containerOf(dep);
  checkProbes(c, "coordinator", 9465);
  expect(c.resources.limits && c.resources.limits.cpu && c.resources.limits.memory,
         "coordinator has cpu and memory limits");
  const vols = dep.spec.template.spec.volumes;
  expect(vols.some((v) => v.persistentVolumeClaim &&
                          v.persistentVolumeClaim.claimName === "trainlet-coordinator-state"),
         "coordinator mounts its PVC");
  expect(!c.volumeMounts.some((m) => m.subPath), "coordinator mounts no subPath (updates reach it)");
}
const svc = find(base, "Service", "trainlet-coordinator");
if (svc) {
  const ports = svc.spec.ports.map((p) => p.port).sort();
  expect(JSON.stringify(ports) === "[7070,7071,7072,9465]",
         `service ports 7070 7071 7072 9465 (got ${ports})`);
}

// Agents.
const ds = find(base, "DaemonSet", "trainlet-agent");
if (ds) {
  const spec = ds.spec.template.spec;
  expect(spec.hostNetwork === true, "agent uses hostNetwork");
  expect(spec.dnsPolicy === "ClusterFirstWithHostNet", "agent resolves Services with hostNetwork");
  expect(spec.volumes.some((v) => v.hostPath && v.hostPath.path === "/var/lib/trainlet-agent"),
         "agent state dir is a hostPath");
  checkProbes(containerOf(ds), "agent", 9464);
  expect(!containerOf(ds).volumeMounts.some((m) => m.subPath), "agent mounts no subPath");
}

// Every host grant in the agent's source manifest has a comment within the three lines above.
const dsLines = fs.readFileSync(
    path.join(src, "deploy/kubernetes/base/agent-daemonset.yaml"), "utf8").split("\n");
const grant = /^\s*(hostNetwork|hostPID|hostIPC|hostPath|privileged|add|dnsPolicy|runAsUser|medium):/;
dsLines.forEach((line, i) => {
  if (grant.test(line) && !dsLines.slice(Math.max(0, i - 3), i).some((l) => /^\s*#/.test(l))) {
    failures.push(`agent-daemonset.yaml:${i + 1}: "${line.trim()}" has no justifying comment above it`);
  }
});

// The shipped runtimes, byte for byte, in the ConfigMap and in base/runtimes.
const runtimes = fs.readdirSync(path.join(src, "deploy/runtimes")).filter((f) => f.endsWith(".yaml"));
const cm = find(base, "ConfigMap", "trainlet-runtimes");
expect(runtimes.length > 0, "deploy/runtimes has runtimes");
for (const f of runtimes) {
  const want = fs.readFileSync(path.join(src, "deploy/runtimes", f), "utf8");
  const copy = path.join(src, "deploy/kubernetes/base/runtimes", f);
  expect(fs.existsSync(copy) && fs.readFileSync(copy, "utf8") === want,
         `deploy/kubernetes/base/runtimes/${f} equals deploy/runtimes/${f} (cp deploy/runtimes/*.yaml deploy/kubernetes/base/runtimes/ and list it in the configMapGenerator)`);
  expect(cm && cm.data && cm.data[f] === want, `ConfigMap trainlet-runtimes holds ${f} unchanged`);
}
if (cm) {
  expect(Object.keys(cm.data).length === runtimes.length,
         `ConfigMap trainlet-runtimes holds exactly deploy/runtimes (${Object.keys(cm.data)})`);
}

// Keys: the Secrets carry the files make-keys wrote.
const agentKeys = find(base, "Secret", "trainlet-agent-keys");
const agentFiles = fs.readdirSync(path.join(keysDir, "agents")).filter((f) => f.endsWith(".key"));
expect(agentFiles.length >= 2, "make-keys wrote the node keys");
for (const f of agentFiles) {
  const want = fs.readFileSync(path.join(keysDir, "agents", f), "utf8");
  expect(agentKeys && agentKeys.data && b64(agentKeys.data[f]) === want, `Secret trainlet-agent-keys holds ${f}`);
}
const allow = find(base, "Secret", "trainlet-allowlists");
for (const f of ["agents.allow", "operators.allow"]) {
  const want = fs.readFileSync(path.join(keysDir, f), "utf8");
  expect(allow && b64(allow.data[f]) === want, `Secret trainlet-allowlists holds ${f}`);
}
const ckey = find(base, "Secret", "trainlet-coordinator-key");
expect(ckey && b64(ckey.data["coordinator.key"]) ===
       fs.readFileSync(path.join(keysDir, "coordinator.key"), "utf8"), "coordinator key Secret");

// GPU overlay.
const gds = find(gpu, "DaemonSet", "trainlet-agent");
if (gds) {
  const spec = gds.spec.template.spec;
  expect(spec.nodeSelector && spec.nodeSelector["nvidia.com/gpu.present"] === "true",
         "gpu overlay selects nvidia.com/gpu.present=true");
  expect((spec.tolerations || []).some((t) => t.key === "nvidia.com/gpu"),
         "gpu overlay tolerates nvidia.com/gpu");
  const env = containerOf(gds).env.map((e) => e.name);
  expect(env.includes("NVIDIA_VISIBLE_DEVICES") && env.includes("NODE_NAME"),
         "gpu overlay adds the NVIDIA env and keeps the base env");
  expect(containerOf(gds).args.length === containerOf(ds).args.length, "gpu overlay keeps the args");
} else {
  failures.push("gpu overlay has DaemonSet trainlet-agent");
}
expect(gpu.length === base.length, "gpu overlay renders the whole base");

// HA overlay (issue 17): three coordinators on etcd, a 3-member etcd StatefulSet, no shared volume.
if (haPath) {
  const ha = load(haPath);
  const hdep = find(ha, "Deployment", "trainlet-coordinator");
  if (hdep) {
    const args = containerOf(hdep).args;
    const has = (a) => args.includes(a);
    const arg = (k) => (args.find((a) => a.startsWith(k + "=")) || "").slice(k.length + 1);
    expect(hdep.spec.replicas === 3, "ha overlay runs 3 coordinators");
    expect(hdep.spec.strategy.type === "RollingUpdate" && !hdep.spec.strategy.recreate,
           "ha overlay rolls the coordinators one at a time");
    expect(has("--store=etcd"), "ha coordinators use store: etcd");
    expect(arg("--etcd-endpoints").split(",").length === 3, "ha coordinators know the 3 etcd members");
    for (const k of ["--agent-advertise", "--operator-advertise", "--exec-advertise"]) {
      expect(arg(k).includes("$(POD_IP)"), `ha coordinators advertise their pod IP (${k})`);
    }
    expect(containerOf(hdep).env.some((e) => e.name === "POD_IP"), "ha coordinators get POD_IP");
    const vols = hdep.spec.template.spec.volumes;
    const state = vols.find((v) => v.name === "state");
    expect(state && state.emptyDir && !state.persistentVolumeClaim, "ha coordinators share no volume");
    // Everything the base's coordinator is started with, but the store, is kept.
    const baseDep = find(base, "Deployment", "trainlet-coordinator");
    for (const a of containerOf(baseDep).args) {
      if (!a.startsWith("--exec-advertise")) expect(has(a), `ha coordinators keep ${a}`);
    }
  } else {
    failures.push("ha overlay has Deployment trainlet-coordinator");
  }
  expect(!find(ha, "PersistentVolumeClaim", "trainlet-coordinator-state"),
         "ha overlay drops the coordinator's volume claim");
  const etcd = find(ha, "StatefulSet", "trainlet-etcd");
  expect(etcd && etcd.spec.replicas === 3 && etcd.spec.serviceName === "trainlet-etcd",
         "ha overlay runs etcd as a 3-member StatefulSet");
  const esvc = find(ha, "Service", "trainlet-etcd");
  expect(esvc && esvc.spec.clusterIP === "None", "ha overlay's etcd Service is headless");
  for (const d of ha) {
    if (d.kind !== "Namespace") {
      expect(d.metadata.namespace === "trainlet", `ha: ${d.kind}/${d.metadata.name} is in namespace trainlet`);
    }
  }
  const pdb = ha.find((d) => d.kind === "PodDisruptionBudget" && d.metadata.name === "trainlet-coordinator");
  expect(pdb && pdb.spec.minAvailable === 2, "ha overlay lets a drain take one coordinator at a time");
}

for (const f of failures) console.error(`FAIL: ${f}`);
if (failures.length === 0) console.log("rendered manifests meet trainlet's expectations");
process.exitCode = failures.length ? 1 : 0;

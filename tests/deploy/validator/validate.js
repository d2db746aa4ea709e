#!/usr/bin/env node
// Validates rendered Kubernetes manifests offline.
//
//   node validate.js FILE...      (a FILE of "-" reads stdin)
//
// Each YAML document must be a Kubernetes object of a kind kubernetes-models knows, and must pass
// that model's schema validation (types, required fields, formats). The set of documents in one
// FILE must also be self-consistent, as `kubectl apply -k` needs it to be: every Secret,
// ConfigMap and PersistentVolumeClaim a pod template mounts is among them, every named probe
// port is a container port, and every Service and PodDisruptionBudget selects some pod template.
// Prints one line per problem, naming the file, the object and the field; exits 1 on any.
"use strict";

const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

// "apps/v1" + "Deployment" -> the model's module, e.g. kubernetes-models/apps/v1/Deployment.
function loadModel(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9]+$/.test(kind)) {
    return null;
  }
  const parts = apiVersion.split("/");
  if (parts.length > 2 || parts.some((p) => !/^[a-z0-9.-]+$/.test(p))) return null;
  const modulePath = ["kubernetes-models", ...parts, kind].join("/");
  try {
    return require(modulePath)[kind] || null;
  } catch (e) {
    if (e.code === "MODULE_NOT_FOUND") return null;
    throw e;
  }
}

function objectName(doc) {
  const md = (doc && doc.metadata) || {};
  return `${doc && doc.kind}/${md.name}`;
}

function podSpecOf(doc) {
  if (["Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"].includes(doc.kind)) {
    return doc.spec && doc.spec.template && doc.spec.template.spec;
  }
  if (doc.kind === "Pod") return doc.spec;
  return null;
}

function podLabelsOf(doc) {
  if (doc.kind === "Pod") return (doc.metadata && doc.metadata.labels) || {};
  return (doc.spec && doc.spec.template && doc.spec.template.metadata &&
          doc.spec.template.metadata.labels) || {};
}

function selects(selector, labels) {
  return Object.entries(selector || {}).every(([k, v]) => labels[k] === v);
}

function crossReferences(docs, report) {
  const have = (kind, name, ns) =>
    docs.some((d) => d.kind === kind && d.metadata.name === name &&
                     (d.metadata.namespace || "") === (ns || ""));
  for (const doc of docs) {
    const ns = doc.metadata.namespace || "";
    const spec = podSpecOf(doc);
    if (spec) {
      for (const v of spec.volumes || []) {
        if (v.secret && !have("Secret", v.secret.secretName, ns) && !v.secret.optional) {
          report(doc, `volume ${v.name}: Secret ${v.secret.secretName} is not among the objects`);
        }
        if (v.configMap && !have("ConfigMap", v.configMap.name, ns) && !v.configMap.optional) {
          report(doc, `volume ${v.name}: ConfigMap ${v.configMap.name} is not among the objects`);
        }
        if (v.persistentVolumeClaim &&
            !have("PersistentVolumeClaim", v.persistentVolumeClaim.claimName, ns)) {
          report(doc, `volume ${v.name}: PersistentVolumeClaim ` +
                          `${v.persistentVolumeClaim.claimName} is not among the objects`);
        }
      }
      for (const c of [...(spec.initContainers || []), ...(spec.containers || [])]) {
        // A StatefulSet's volumeClaimTemplates are volumes of its pods too.
        const volumeNames = new Set([...(spec.volumes || []),
                                     ...((doc.spec && doc.spec.volumeClaimTemplates) || [])
                                         .map((t) => t.metadata)].map((v) => v.name));
        for (const m of c.volumeMounts || []) {
          if (!volumeNames.has(m.name)) {
            report(doc, `container ${c.name}: volumeMount ${m.name} names no volume`);
          }
        }
        const portNames = new Set((c.ports || []).map((p) => p.name).filter(Boolean));
        for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"]) {
          const port = c[probe] && c[probe].httpGet && c[probe].httpGet.port;
          if (typeof port === "string" && !portNames.has(port)) {
            report(doc, `container ${c.name}: ${probe} port ${port} is not a container port`);
          }
        }
      }
    }
    let selector = null;
    if (doc.kind === "Service") selector = doc.spec && doc.spec.selector;
    if (doc.kind === "PodDisruptionBudget") {
      selector = doc.spec && doc.spec.selector && doc.spec.selector.matchLabels;
    }
    if (selector && !docs.some((d) => podSpecOf(d) && (d.metadata.namespace || "") === ns &&
                                      selects(selector, podLabelsOf(d)))) {
      report(doc, "selector matches no pod template among the objects");
    }
  }
}

function validateFile(file) {
  const text = file === "-" ? fs.readFileSync(0, "utf8") : fs.readFileSync(file, "utf8");
  const problems = [];
  const report = (doc, msg) => problems.push(`${file}: ${objectName(doc)}: ${msg}`);
  const docs = [];
  for (const d of YAML.parseAllDocuments(text)) {
    if (d.errors.length > 0) {
      problems.push(`${file}: YAML: ${d.errors[0].message}`);
      continue;
    }
    const doc = d.toJS();
    if (doc === null || doc === undefined) continue;  // an empty document
    if (typeof doc !== "object" || Array.isArray(doc)) {
      problems.push(`${file}: a document is not a mapping`);
      continue;
    }
    if (!doc.metadata || typeof doc.metadata.name !== "string" || doc.metadata.name === "") {
      report(doc, "metadata.name is missing");
      continue;
    }
    const Model = loadModel(doc.apiVersion, doc.kind);
    if (!Model) {
      report(doc, `no Kubernetes schema for apiVersion ${doc.apiVersion} kind ${doc.kind}`);
      continue;
    }
    // The API server decodes base64 with Go's decoder, which skips line breaks, and kustomize
    // 5 writes long Secret values folded over several lines; the schema's "byte" format does
    // not allow them, so they are removed first (nothing else is).
    for (const field of ["data", "binaryData"]) {
      const values = (doc.kind === "Secret" || doc.kind === "ConfigMap") && doc[field];
      if (values && typeof values === "object") {
        for (const k of Object.keys(values)) {
          if (typeof values[k] === "string") values[k] = values[k].replace(/[\r\n]/g, "");
        }
      }
    }
    try {
      new Model(doc).validate();
    } catch (e) {
      report(doc, e.message);
      continue;
    }
    docs.push(doc);
  }
  if (docs.length === 0 && problems.length === 0) problems.push(`${file}: no objects`);
  crossReferences(docs, report);
  return { count: docs.length, problems };
}

function main(argv) {
  if (argv.length === 0) {
    console.error("usage: validate.js FILE... (- for stdin)");
    return 2;
  }
  let failed = false;
  for (const file of argv) {
    let result;
    try {
      result = validateFile(file);
    } catch (e) {
      console.error(`${file}: ${e.message}`);
      failed = true;
      continue;
    }
    for (const p of result.problems) console.error(p);
    if (result.problems.length > 0) {
      failed = true;
    } else {
      console.log(`${path.basename(file)}: ${result.count} objects valid`);
    }
  }
  return failed ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));

#!/usr/bin/env python3
"""The SPDX 2.3 SBOM (JSON) of kubectl-kruntimes for one target: every crate of Cargo.lock that
the binary's normal build for that target depends on (`cargo metadata --filter-platform`, no dev
or build-only tools of the tests, no crate of another platform), with its version, license and
package URL.

    release/sbom.py VERSION REPOSITORY TARGET > kubectl-kruntimes-OS-ARCH.spdx.json
"""
import datetime
import json
import subprocess
import sys

version, repository, target = sys.argv[1:4]
meta = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", target],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
)
packages = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
root = meta["resolve"]["root"]

# The crates the binary links: normal dependencies, transitively (build scripts' and tests'
# own dependencies are not in the binary).
linked, todo = set(), [root]
while todo:
    node = nodes[todo.pop()]
    for dep in node["deps"]:
        if any(k["kind"] is None for k in dep["dep_kinds"]) and dep["pkg"] not in linked:
            linked.add(dep["pkg"])
            todo.append(dep["pkg"])


def spdx_id(pkg):
    return "SPDXRef-Package-" + "".join(
        c if c.isalnum() or c in ".-" else "-" for c in f'{pkg["name"]}-{pkg["version"]}'
    )


def package(pkg):
    entry = {
        "SPDXID": spdx_id(pkg),
        "name": pkg["name"],
        "versionInfo": pkg["version"],
        "downloadLocation": pkg.get("repository") or "NOASSERTION",
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": pkg.get("license") or "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "filesAnalyzed": False,
    }
    if pkg.get("source", "") and pkg["source"].startswith("registry+"):
        entry["externalRefs"] = [
            {
                "referenceCategory": "PACKAGE-MANAGER",
                "referenceType": "purl",
                "referenceLocator": f'pkg:cargo/{pkg["name"]}@{pkg["version"]}',
            }
        ]
    return entry


me = packages[root]
doc = {
    "spdxVersion": "SPDX-2.3",
    "dataLicense": "CC0-1.0",
    "SPDXID": "SPDXRef-DOCUMENT",
    "name": f"kubectl-kruntimes-{version}",
    "documentNamespace": f"{repository}/releases/v{version}/sbom",
    "creationInfo": {
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "creators": ["Tool: kubectl-kruntimes release/sbom.py"],
    },
    "packages": [package(me)] + sorted(
        (package(packages[i]) for i in linked), key=lambda p: p["SPDXID"]
    ),
    "relationships": [
        {
            "spdxElementId": "SPDXRef-DOCUMENT",
            "relationshipType": "DESCRIBES",
            "relatedSpdxElement": spdx_id(me),
        }
    ]
    + [
        {
            "spdxElementId": spdx_id(me),
            "relationshipType": "DEPENDS_ON",
            "relatedSpdxElement": spdx_id(packages[i]),
        }
        for i in sorted(linked)
    ],
}
json.dump(doc, sys.stdout, indent=1, sort_keys=True)
print()

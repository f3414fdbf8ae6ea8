#!/usr/bin/env python3
"""check-report.py: check a cphicache JSON report (from `run --report` or `validate --report`) against a layout.

    check-report.py run REPORT --ranks 16 --cp 8 --dp 2 --nodes 2
    check-report.py validate REPORT --ranks 8 --cp 8 --dp 1 --nodes 1
    check-report.py run REPORT --ranks 16 --cp 8 --dp 2 --nodes 2 --l3-hits
    check-report.py run REPORT --ranks 16 --cp 16 --dp 1 --nodes 2 --group-nodes 2
    check-report.py run REPORT --ranks 16 --cp 8 --dp 2 --nodes 2 --group-nodes 2 --slab-reference BLOCK_REPORT
    check-report.py --self-test

Prints one line per failed check and exits 1 when any failed, 0 otherwise. What it checks, for both kinds:
the layout (ranks, cp, dp), one `groups` entry per CP group of `cp` ranks, each group on exactly `group-nodes`
hosts (default 1) and the groups spread over `nodes` distinct hosts; for a group over several nodes, `groups[].nodes`
names them, holds cp/group-nodes of its ranks on each (CP8 over two nodes: 4 + 4), and each node's slab
(`slab_bytes_per_node`) is 1/group-nodes of the group's (`capacity.l2_slab_bytes`); and every consensus collective
of every group run on the group's own communicator (comm_size == cp; a collective on the world or on a size-1
communicator is the CP-scoping bug).
With --slab-reference (the report of a job with the same slots and one-node groups, e.g. the block-placed CP8DP2):
each node's slab is also 1/group-nodes of that job's measured one-node slab, not only of this report's own sum.
For `run`: no placement divergence, no load-back or audit mismatch, no copy error, and the step consensus and the
placement comparison actually ran.
For `validate`: at least one check, every check passed with wrong == 0.
With --l3-hits (a run over an L3 directory another job filled): every CP group served prompt tokens from L3
blocks, no block read was corrupt and no write failed.
"""
import argparse
import json
import sys

# The consensus calls a CP group makes: one at every step (commit, load-backs, digest, errors in one all-reduce),
# one in every flush, one after the last step, the object-by-object placement comparisons, and with an L3 the
# prefetch counts at the start of every serving step.
COLLECTIVES = ("step", "flush", "final", "object_compare", "l3_prefetch")
# Collectives that every non-trivial run must have entered at least once; a run without a flush has no flush call.
COLLECTIVES_THAT_MUST_RUN = ("step", "final", "object_compare")


def get(report, dotted):
    """Returns report[a][b]... for "a.b", or raises KeyError naming the missing key."""
    value = report
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            raise KeyError(dotted)
        value = value[key]
    return value


def check_layout(kind, report, want, problems):
    for key in ("ranks", "cp", "dp"):
        # The validate report need not repeat the layout; when it does, it must be the right one.
        if kind == "validate" and key not in report:
            continue
        if report.get(key) != want[key]:
            problems.append(f"{key} is {report.get(key)}, want {want[key]}")
    groups = report.get("groups")
    if not isinstance(groups, list):
        problems.append("no groups array")
        return
    if len(groups) != want["dp"]:
        problems.append(f"{len(groups)} CP groups, want {want['dp']}")
    hosts_seen = set()
    for index, group in enumerate(groups):
        name = f"group {group.get('group', index)}"
        if group.get("size") != want["cp"]:
            problems.append(f"{name}: size {group.get('size')}, want {want['cp']}")
        hosts = group.get("hosts") or []
        group_nodes = want.get("group_nodes", 1)
        if len(set(hosts)) != group_nodes:
            problems.append(f"{name}: hosts {sorted(set(hosts))}, want exactly {group_nodes} node(s) per CP group")
        if group_nodes > 1:
            check_group_nodes(name, kind, report, group, sorted(set(hosts)), problems)
        hosts_seen.update(hosts)
        check_collectives(name, group.get("collectives") or {}, want["cp"], problems)
    if len(hosts_seen) != want["nodes"]:
        problems.append(f"the groups run on {len(hosts_seen)} distinct hosts {sorted(hosts_seen)}, want {want['nodes']}")


def check_group_nodes(name, kind, report, group, hosts, problems):
    """A CP group over several nodes names them, and each node's slab holds 1/k of the group's bytes."""
    if kind != "run":
        return
    nodes = group.get("nodes") or []
    if sorted(nodes) != hosts:
        problems.append(f"{name}: nodes {nodes}, want its hosts {hosts}")
    # Every node's slab has one layout, so every node holds the same share of the group's ranks.
    members = group.get("hosts") or []
    shares = {host: members.count(host) for host in hosts}
    if len(set(shares.values())) != 1:
        problems.append(f"{name}: its ranks per node are {shares}, want the same share on each of its nodes")
    per_node, whole = group.get("slab_bytes_per_node", 0), get(report, "capacity.l2_slab_bytes")
    if not per_node > 0 or per_node * len(hosts) != whole:
        problems.append(f"{name}: {per_node} slab bytes on each of {len(hosts)} nodes, want 1/{len(hosts)} of the group's {whole}")


def check_slab_reference(report, reference, problems):
    """Each node's slab of a spanning group is 1/k of the one-node slab that a reference job of the same slots
    measured (its groups' slab_bytes_per_node, each group inside one node)."""
    for key in ("capacity.l2_slots", "capacity.l2_slab_bytes"):
        if get(report, key) != get(reference, key):
            problems.append(f"{key} is {get(report, key)}, but {get(reference, key)} in the slab reference: not the same slots")
    whole = {g.get("slab_bytes_per_node") for g in reference.get("groups") or []}
    if len(whole) != 1 or any(len(set(g.get("hosts") or [])) != 1 for g in reference.get("groups") or []):
        problems.append(f"the slab reference's groups are not each inside one node with one slab size ({sorted(whole, key=str)})")
        return
    whole = whole.pop()
    for index, group in enumerate(report.get("groups") or []):
        k, per_node = len(set(group.get("hosts") or [])), group.get("slab_bytes_per_node", 0)
        if k < 2 or per_node * k != whole:
            problems.append(f"group {group.get('group', index)}: {per_node} slab bytes on each of {k} node(s), "
                            f"want 1/{max(k, 2)} of the one-node slab's {whole} in the slab reference")


def check_collectives(name, collectives, cp, problems):
    for collective in COLLECTIVES:
        entry = collectives.get(collective)
        if not isinstance(entry, dict):
            problems.append(f"{name}: no collectives.{collective}")
            continue
        if entry.get("count", 0) > 0 and entry.get("comm_size") != cp:
            problems.append(f"{name}: {collective} ran on a communicator of {entry.get('comm_size')} ranks, want the CP group's {cp}")
        if collective in COLLECTIVES_THAT_MUST_RUN and not entry.get("count", 0) > 0:
            problems.append(f"{name}: {collective} never ran (count {entry.get('count')})")


def check_run(report, problems):
    for key, want in (("placement.divergences", 0), ("verify.mismatches", 0), ("verify.audit_mismatches", 0),
                      ("verify.copy_errors", 0)):
        value = get(report, key)
        if value != want:
            problems.append(f"{key} is {value}, want {want}")
    for key in ("placement.checks", "verify.pages_checked", "verify.audit_objects", "steps", "requests"):
        value = get(report, key)
        if not value > 0:
            problems.append(f"{key} is {value}: the run did no work to check")


def check_l3_hits(report, problems):
    for key in ("l3.corrupt", "l3.write_errors"):
        if get(report, key) != 0:
            problems.append(f"{key} is {get(report, key)}, want 0")
    for index, group in enumerate(report.get("groups") or []):
        if not group.get("l3_hit_tokens", 0) > 0:
            problems.append(f"group {group.get('group', index)}: l3_hit_tokens is {group.get('l3_hit_tokens')}: it served nothing from the L3")


def check_validate(report, problems):
    checks = report.get("checks")
    if not isinstance(checks, list) or not checks:
        problems.append("no checks in the validate report")
        return
    for check in checks:
        if check.get("result") != "pass" or check.get("wrong", 0) != 0:
            problems.append(f"check {check.get('name')}: {check.get('result')}, wrong {check.get('wrong')}")


def check(kind, report, want):
    """Returns the list of problems found; empty means the report passes."""
    problems = []
    try:
        check_layout(kind, report, want, problems)
        (check_run if kind == "run" else check_validate)(report, problems)
        if want.get("l3_hits"):
            check_l3_hits(report, problems)
        if want.get("slab_reference") is not None:
            check_slab_reference(report, want["slab_reference"], problems)
    except KeyError as missing:
        problems.append(f"the report has no {missing.args[0]}")
    return problems


def sample_report(cp=8, dp=2):
    """A report that passes, for the self-test: the schema of `cphicache run --report`."""
    def group(g):
        return {"group": g, "size": cp, "hosts": [f"node{g + 1}"] * cp,
                "collectives": {c: {"count": 5, "comm_size": cp} for c in COLLECTIVES}, "l3_hit_tokens": 64 * (g + 1)}
    return {"ranks": cp * dp, "cp": cp, "dp": dp, "steps": 10, "requests": 40,
            "placement": {"checks": 3, "divergences": 0}, "verify": {"pages_checked": 100, "mismatches": 0, "audit_objects": 40, "audit_mismatches": 0, "copy_errors": 0},
            "checks": [{"name": "placement", "result": "pass", "wrong": 0}], "l3": {"corrupt": 0, "write_errors": 0},
            "groups": [group(g) for g in range(dp)]}


def sample_spanning_report():
    """A CP16 report over two nodes that passes."""
    report = sample_report(cp=16, dp=1)
    report["groups"][0].update(hosts=["node1"] * 8 + ["node2"] * 8, nodes=["node1", "node2"], slab_bytes_per_node=1024)
    report["capacity"] = {"l2_slab_bytes": 2048}
    return report


def self_test_spanning():
    """The checks of a group over two nodes: the good report passes, each broken one is caught."""
    want = {"ranks": 16, "cp": 16, "dp": 1, "nodes": 2, "group_nodes": 2}
    breakages = {
        "group on one node": lambda r: r["groups"][0].update(hosts=["node1"] * 16),
        "nodes not named": lambda r: r["groups"][0].update(nodes=["node1"]),
        "whole slab on each node": lambda r: r["groups"][0].update(slab_bytes_per_node=2048),
    }
    failures = []
    if check("run", sample_spanning_report(), want):
        failures.append("the good spanning report fails: " + "; ".join(check("run", sample_spanning_report(), want)))
    for name, breakage in breakages.items():
        report = sample_spanning_report()
        breakage(report)
        if not check("run", report, want):
            failures.append(f"{name}: not detected")
    return failures, len(breakages) + 1


def sample_block_report(cp=8, dp=2):
    """A CP8DP2 report placed block-wise (each group inside one node, one whole slab), as a slab reference."""
    report = sample_report(cp=cp, dp=dp)
    for group in report["groups"]:
        group.update(nodes=group["hosts"][:1], slab_bytes_per_node=2048)
    report["capacity"] = {"l2_slots": 16, "l2_slab_bytes": 2048}
    return report


def sample_spread_report():
    """A CP8DP2 report placed round robin: each group 4 + 4 over node1 and node2, each node's slab half of one."""
    report = sample_block_report()
    for group in report["groups"]:
        group.update(hosts=["node1", "node2"] * 4, nodes=["node1", "node2"], slab_bytes_per_node=1024)
    return report


def self_test_spread():
    """The checks of CP8DP2 with each group split over both nodes: the good report passes against its block-placed
    reference, and each broken one is caught, a block-placed report (that does not span) first."""
    want = {"ranks": 16, "cp": 8, "dp": 2, "nodes": 2, "group_nodes": 2, "slab_reference": sample_block_report()}
    breakages = {
        "block-placed report, no group spans": lambda r: r.update(sample_block_report()),
        "one group inside one node": lambda r: r["groups"][1].update(hosts=["node2"] * 8, nodes=["node2"]),
        "split 5 + 3": lambda r: r["groups"][0].update(hosts=["node1"] * 5 + ["node2"] * 3),
        "whole slab on each node, capacity halved": lambda r: (r["groups"][0].update(slab_bytes_per_node=2048),
                                                               r["capacity"].update(l2_slab_bytes=4096)),
        "other slots than the reference": lambda r: r["capacity"].update(l2_slots=32),
    }
    failures = []
    problems = check("run", sample_spread_report(), want)
    if problems:
        failures.append("the good spread report fails: " + "; ".join(problems))
    for name, breakage in breakages.items():
        report = sample_spread_report()
        breakage(report)
        if not check("run", report, want):
            failures.append(f"spread: {name}: not detected")
    # The reference itself must be one-node groups: a spanning report is no reference.
    if not check("run", sample_spread_report(), dict(want, slab_reference=sample_spread_report())):
        failures.append("spread: a spanning slab reference: not detected")
    # A one-node slab the reference measured larger than the capacity says (a layout's padding): half of the
    # capacity is then not half of a one-node slab, which only the reference shows.
    padded = sample_block_report()
    for group in padded["groups"]:
        group.update(slab_bytes_per_node=2304)
    if not check("run", sample_spread_report(), dict(want, slab_reference=padded)):
        failures.append("spread: each node's slab not half of the reference's one-node slab: not detected")
    return failures, len(breakages) + 3


def self_test():
    """Each broken report must be caught, and the good one must pass: a checker that cannot fail is no test."""
    want = {"ranks": 16, "cp": 8, "dp": 2, "nodes": 2}
    breakages = {
        "divergence": lambda r: r["placement"].update(divergences=1),
        "mismatch": lambda r: r["verify"].update(mismatches=4),
        "audit mismatch": lambda r: r["verify"].update(audit_mismatches=1),
        "copy error": lambda r: r["verify"].update(copy_errors=1),
        "nothing audited": lambda r: r["verify"].update(audit_objects=0),
        "world-scoped collective": lambda r: r["groups"][1]["collectives"]["step"].update(comm_size=16),
        "size-1 collective": lambda r: r["groups"][0]["collectives"]["object_compare"].update(comm_size=1),
        "assert never ran": lambda r: r["groups"][0]["collectives"]["object_compare"].update(count=0),
        "step consensus never ran": lambda r: r["groups"][0]["collectives"]["step"].update(count=0),
        "groups on one node": lambda r: r["groups"][1].update(hosts=["node1"] * 8),
        "group across nodes": lambda r: r["groups"][0].update(hosts=["node1"] * 4 + ["node2"] * 4),
        "one group missing": lambda r: r["groups"].pop(),
        "key missing": lambda r: r.pop("verify"),
        "failed validate check": lambda r: r["checks"].append({"name": "reserve", "result": "fail", "wrong": 2}),
        "world-scoped l3 prefetch": lambda r: r["groups"][0]["collectives"]["l3_prefetch"].update(comm_size=16),
        "l3: a group without hits": lambda r: r["groups"][1].update(l3_hit_tokens=0),
        "l3: a corrupt block": lambda r: r["l3"].update(corrupt=1),
    }
    failures = []
    want_l3 = dict(want, l3_hits=True)
    if check("run", sample_report(), want_l3) or check("validate", sample_report(), want):
        failures.append("the good report fails: " + "; ".join(check("run", sample_report(), want)))
    for name, breakage in breakages.items():
        report = sample_report()
        breakage(report)
        kind = "validate" if "validate" in name else "run"
        if not check(kind, report, want_l3 if name.startswith("l3") else want):
            failures.append(f"{name}: not detected")
    spanning_failures, spanning_cases = self_test_spanning()
    spread_failures, spread_cases = self_test_spread()
    failures += spanning_failures + spread_failures
    cases = len(breakages) + 1 + spanning_cases + spread_cases
    for failure in failures:
        print(f"check-report self-test: {failure}")
    print(f"check-report self-test: {cases - len(failures)} of {cases} cases right")
    return 1 if failures else 0


def summary(args, report, want):
    """The figures a passing check rests on, for the log: the counts, and for spanning groups their nodes and slabs."""
    text = ""
    if args.kind == "run":
        verify = report["verify"]
        text = (f"; {report['placement']['divergences']} divergences, {verify['mismatches']} mismatches, "
                f"{verify['audit_objects']} objects audited, {verify['audit_mismatches']} audit mismatches")
    if args.group_nodes > 1 and args.kind == "run":
        for group in report["groups"]:
            shares = "+".join(str(group["hosts"].count(node)) for node in group["nodes"])
            text += f"; group {group['group']} over {','.join(group['nodes'])} ({shares}), {group['slab_bytes_per_node']} slab bytes a node"
        if want["slab_reference"] is not None:
            text += f", one-node slab {want['slab_reference']['groups'][0]['slab_bytes_per_node']} bytes in {args.slab_reference}"
        else:
            text += f", one-node slab {report['capacity']['l2_slab_bytes']} bytes (capacity.l2_slab_bytes)"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", nargs="?", choices=("run", "validate"))
    parser.add_argument("report", nargs="?")
    parser.add_argument("--ranks", type=int)
    parser.add_argument("--cp", type=int)
    parser.add_argument("--dp", type=int)
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--group-nodes", type=int, default=1, help="the nodes each CP group spans")
    parser.add_argument("--l3-hits", action="store_true", help="every CP group must have served L3 hits")
    parser.add_argument("--slab-reference", metavar="REPORT",
                        help="the report of a job with the same slots and one-node groups: each node's slab must be 1/group-nodes of its slab")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.kind or not args.report or None in (args.ranks, args.cp, args.dp, args.nodes):
        parser.error("give KIND REPORT --ranks --cp --dp --nodes, or --self-test")
    try:
        with open(args.report) as file:
            report = json.load(file)
    except (OSError, ValueError) as err:
        print(f"{args.report}: cannot read the report: {err}")
        return 1
    want = {"ranks": args.ranks, "cp": args.cp, "dp": args.dp, "nodes": args.nodes, "l3_hits": args.l3_hits,
            "group_nodes": args.group_nodes, "slab_reference": None}
    if args.slab_reference:
        try:
            with open(args.slab_reference) as file:
                want["slab_reference"] = json.load(file)
        except (OSError, ValueError) as err:
            print(f"{args.slab_reference}: cannot read the slab reference (--slab-reference): {err}")
            return 1
    problems = check(args.kind, report, want)
    for problem in problems:
        print(f"{args.report}: {problem}")
    if not problems:
        print(f"{args.report}: ok ({args.kind}, {args.ranks} ranks, cp {args.cp}, dp {args.dp}, {args.nodes} node(s){summary(args, report, want)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

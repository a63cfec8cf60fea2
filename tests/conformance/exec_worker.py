"""A worker written against the published protocol only: it imports nothing of xpspec.

It speaks ``xpspec-worker/1`` on its standard streams and implements the ``env``
capability for toy envs with fixed or cycled episode plans (the toy env contract of
``spec/timesteps.md``, written out here from the text), next-step auto-reset, and the
policy state "steps since FIRST". Anything else is answered ``unsupported``. Used by the
harness tests as ``--adapter 'exec:python tests/conformance/exec_worker.py'``.

With ``--misbehave MODE`` it breaks in one way on every ``run``: ``noise`` (prints to
standard output before answering: a protocol violation), ``late`` (answers after 30 s).
"""

import json
import sys
import time

PROTOCOL = "xpspec-worker/1"
INFO = {
    "name": "exec-toy",
    "framework": "a toy env stepped by a program that does not import xpspec",
    "framework_version": "1",
    "capabilities": ["env", "state"],
}


def plan(schedule, env, k):
    if schedule["kind"] == "fixed":
        return schedule["length"], schedule.get("ending", "terminated")
    if schedule["kind"] == "cycle":
        episodes = schedule["episodes"]
        entry = episodes[(k + env * schedule.get("offset", 0)) % len(episodes)]
        return entry["length"], entry["ending"]
    return None


def run_env(scenario):
    spec = scenario["env"]
    if spec.get("autoreset", "next-step") != "next-step" or spec.get("goals"):
        return {"outcome": "unsupported", "reason": "only next-step auto-reset without goals"}
    schedules = spec["schedules"]
    n = spec["num_envs"]
    if any(s["kind"] not in ("fixed", "cycle") for s in schedules):
        return {"outcome": "unsupported", "reason": "only fixed and cycled episode plans"}
    state = [[0, 0] for _ in range(n)]  # (episode, t) per env
    lines = [json.dumps({"format": "xpspec-trace/3", "producer": "exec-toy"})]
    for _ in range(scenario["steps"]):
        row = {"env": [], "episode": [], "t": [], "step_type": [], "reward": [], "discount": []}
        for e in range(n):
            k, t = state[e]
            length, ending = plan(schedules[e if len(schedules) > 1 else 0], e, k)
            last = t == length
            row["env"].append(e)
            row["episode"].append(k)
            row["t"].append(t)
            row["step_type"].append(0 if t == 0 else 2 if last else 1)
            row["reward"].append(float(t))
            row["discount"].append(0.0 if last and ending == "terminated" else 1.0)
            state[e] = [k + 1, 0] if last else [k, t + 1]
        event = {
            "kind": "env_step",
            "iteration": 0,
            **row,
            "policy_state": list(row["t"]),
            "action": [0] * n,
        }
        lines.append(json.dumps(event, sort_keys=True))
    return {"outcome": "trace", "trace": "\n".join(lines) + "\n"}


def answer(request, misbehave):
    op = request["op"]
    if op == "hello":
        return {"outcome": "ok", "protocol": PROTOCOL, "info": INFO}
    if op == "smoke":
        return {"outcome": "ok"}
    scenario = request["scenario"]
    if misbehave == "noise":
        print("a stray line on standard output", flush=True)
    if misbehave == "late":
        time.sleep(30)
    if scenario["kind"] != "env":
        return {"outcome": "unsupported", "reason": f"no {scenario['kind']} operation"}
    return run_env(scenario)


def main():
    misbehave = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--misbehave" else ""
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "stop":
            return
        response = {"id": request["id"], **answer(request, misbehave)}
        sys.stdout.write(json.dumps(response) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

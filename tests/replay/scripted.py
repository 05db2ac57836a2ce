"""A scripted stand-in for run_cycle: replays decisions written in a test, to check the engine's bookkeeping
independently of any scheduling policy. It is a script, not a scheduler."""

from jobs.scheduling.model import Admit, Assignment, CycleResult, Grow, Preempt, Shrink


class Script:
    def __init__(self, plan):
        # plan: {time: [("admit", job id, node name, devices) | ("preempt", victim id)
        #               | ("admit-workers", job id, [node, ...]) | ("grow", job id, first index, [node, ...])
        #               | ("shrink", job id, [(index, node), ...])]}, consumed once. Workers are 1-device replicas
        # of the role "worker", indexed from 0 (admit-workers) or from `first index` (grow).
        self.plan = {t: list(v) for t, v in plan.items()}
        self.calls = []
        self.snapshots = []

    def __call__(self, snapshot, policy):
        self.calls.append(snapshot.now)
        self.snapshots.append(snapshot)
        steps = self.plan.pop(snapshot.now, [])
        admits, preempts, grows, shrinks = [], [], [], []
        for step in steps:
            if step[0] == "admit":
                _, jid, node, devices = step
                admits.append(Admit(jid, (Assignment("worker", 0, node, devices),)))
            elif step[0] == "admit-workers":
                _, jid, nodes = step
                admits.append(Admit(jid, tuple(Assignment("worker", i, n, 1) for i, n in enumerate(nodes))))
            elif step[0] == "grow":
                _, jid, first, nodes = step
                grows.append(Grow(jid, tuple(Assignment("worker", first + i, n, 1) for i, n in enumerate(nodes))))
            elif step[0] == "shrink":
                _, jid, removed = step
                shrinks.append(Shrink(jid, tuple(Assignment("worker", i, n, 1) for i, n in removed), 0, "test"))
            else:
                preempts.append(Preempt(step[1], 0, "test"))
        return CycleResult(admits=tuple(admits), preemptions=tuple(preempts), grows=tuple(grows),
                           shrinks=tuple(shrinks))

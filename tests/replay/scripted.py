"""A scripted stand-in for run_cycle: replays decisions written in a test, to check the engine's bookkeeping
independently of any scheduling policy. It is a script, not a scheduler."""

from jobs.scheduling.model import Admit, Assignment, CycleResult, Preempt


class Script:
    def __init__(self, plan):
        # plan: {time: [("admit", job id, node name, devices) | ("preempt", victim id)]}, consumed once
        self.plan = {t: list(v) for t, v in plan.items()}
        self.calls = []

    def __call__(self, snapshot, policy):
        self.calls.append(snapshot.now)
        steps = self.plan.pop(snapshot.now, [])
        admits, preempts = [], []
        for step in steps:
            if step[0] == "admit":
                _, jid, node, devices = step
                admits.append(Admit(jid, (Assignment("worker", 0, node, devices),)))
            else:
                preempts.append(Preempt(step[1], 0, "test"))
        return CycleResult(admits=tuple(admits), preemptions=tuple(preempts))

"""pools, pool: capacity online serving lends to training, what it lent, and how fast it got it back."""

from __future__ import annotations

import argparse

from tidal_cli.client import Api, ApiError
from tidal_cli.commands import add_command
from tidal_cli.humanize import timestamp
from tidal_cli.output import emit_json, table

COLUMNS = [("name", "POOL"), ("cluster", "CLUSTER"), ("flavor", "FLAVOR"), ("capacity", "DEVICES"),
           ("demand", "DEMAND"), ("headroom", "HEADROOM"), ("lendable", "LENT"), ("used", "USED"),
           ("given_back_24h", "GIVEN BACK 24H"), ("p50", "P50"), ("p99", "P99")]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}s"


def _row(pool: dict) -> dict:
    return {**pool, "p50": _seconds(pool.get("give_back_p50")), "p99": _seconds(pool.get("give_back_p99"))}


def cmd_pools(args: argparse.Namespace) -> None:
    rows = Api.from_config().get("pools/")
    if args.json:
        return emit_json(rows)
    print(table([_row(p) for p in rows], COLUMNS, empty="No pool lent to your projects in the last 24 h."))


def cmd_pool(args: argparse.Namespace) -> None:
    try:
        pool = Api.from_config().get(f"pools/{args.name}/")
    except ApiError as error:
        if error.status == 404:
            raise error.reworded(f"Pool {args.name} not found: it does not exist or never lent to your projects.") \
                from None
        raise
    if args.json:
        return emit_json(pool)
    print(table([_row(pool)], COLUMNS))
    print(f"\nLast 24 h: {pool.get('lent_hours_24h')} device-hours lent, {pool.get('used_hours_24h')} used by "
          f"training, {pool.get('unmet_hours_24h')} of serving's demand unmet.")
    saved = pool.get("saved_24h")
    if saved and saved["device_hours"]:
        print(f"Training ran {saved['device_hours']} device-hours on it: {saved['cost']:,.2f} {saved['currency']} at "
              f"the tidal rate, {saved['normal_cost']:,.2f} at the normal rate; borrowing saved "
              f"{saved['saved']:,.2f} {saved['currency']}.")
    for miss in pool.get("interferences") or []:
        print(f"Serving p99 {miss['p99_ms']:g} ms over its SLO {miss['slo_ms']:g} ms at {timestamp(miss['at'])} on "
              f"{', '.join(miss['nodes']) or 'every node'}: nothing lent there until {timestamp(miss['until'])}.")
    if pool.get("back_at"):
        print(f"\nThe schedule stops lending at {timestamp(pool['back_at'])}.")
    print("\nTraining on tidal capacity now:")
    print(table(pool.get("jobs") or [], [("id", "ID"), ("project", "PROJECT"), ("name", "NAME"),
                                          ("priority_class", "PRIORITY"), ("devices", "DEVICES")],
                empty="None you may see."))


def register(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "pools", cmd_pools, "pools: serving's demand, headroom, what they lend and give back",
                "Pools (capacity online serving lends to preemptible training) with demand, headroom, devices lent "
                "and used by training now, devices given back over 24 h and the give-back time p50/p99.")
    pool = add_command(sub, "pool", cmd_pool, "one pool's figures and the training on its capacity now")
    pool.add_argument("name", help="the pool's name")

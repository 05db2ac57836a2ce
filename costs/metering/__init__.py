"""Metering, the core every cost is read from: usage segments that follow the state machine (`segments`), the pure
pricing of an interval (`pricing`) under the price catalog (`prices`), the rollup of closed segments into priced
days (`rollup`), and since when capacity and guarantees existed (`existence`). This file imports nothing, so the
pure `pricing` loads no framework."""

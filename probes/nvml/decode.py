"""Pure decoding tables for NVML values: clocks-event (throttle) reasons and topology levels.

No pynvml import: the bit values and level numbers are NVML's ABI (nvml.h), the same in every
nvidia-ml-py version, so rules and tests can decode a recorded bitmask without a driver.
"""

from __future__ import annotations

# nvmlClocksEventReason* / nvmlClocksThrottleReason* bits, in nvml.h order.
THROTTLE_BITS: tuple[tuple[int, str], ...] = (
    (0x001, "idle"),                   # GpuIdle: nothing to run, clocks drop; not a throttle
    (0x002, "app_clocks_setting"),     # ApplicationsClocksSetting (user-set app clocks)
    (0x004, "sw_power_cap"),           # SwPowerCap: power draw hit the power limit
    (0x008, "hw_slowdown"),            # HwSlowdown: thermal or power-brake hardware slowdown
    (0x010, "sync_boost"),             # SyncBoost: held to the slowest GPU of a sync-boost group
    (0x020, "sw_thermal"),             # SwThermalSlowdown: driver cut clocks to stay cool
    (0x040, "hw_thermal"),             # HwThermalSlowdown: hardware over-temperature
    (0x080, "hw_power_brake"),         # HwPowerBrakeSlowdown: external power brake asserted
    (0x100, "display_clock_setting"),  # DisplayClockSetting
    (0x200, "board_limit"),            # (throttle API only) BoardLimit
    (0x400, "reliability"),            # (throttle API only) Reliability
)
IDLE_BIT = 0x001


def decode_throttle(mask: int) -> str:
    """Comma-joined names of the set bits ("sw_power_cap,hw_thermal"); "none" for 0.

    Unknown bits (a newer driver) are kept as hex so nothing is silently dropped.
    """
    mask = int(mask)
    if mask == 0:
        return "none"
    names = [name for bit, name in THROTTLE_BITS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_BITS:
        known |= bit
    extra = mask & ~known
    if extra:
        names.append(hex(extra))
    return ",".join(names)


def is_throttled(mask: int) -> bool:
    """True when some reason other than plain idleness holds the clocks down."""
    return bool(int(mask) & ~IDLE_BIT)


# nvmlGpuTopologyLevel_t -> nvidia-smi topo -m vocabulary.
TOPOLOGY_NAMES: dict[int, str] = {
    0: "PIX",    # NVML_TOPOLOGY_INTERNAL: both GPUs on one board (behind the board's own switch)
    10: "PIX",   # NVML_TOPOLOGY_SINGLE: one PCIe switch between them
    20: "PXB",   # NVML_TOPOLOGY_MULTIPLE: several PCIe switches, no host bridge
    30: "PHB",   # NVML_TOPOLOGY_HOSTBRIDGE: through a CPU's PCIe host bridge
    40: "NODE",  # NVML_TOPOLOGY_NODE: host bridges within one NUMA node
    50: "SYS",   # NVML_TOPOLOGY_SYSTEM: across NUMA nodes (SMP interconnect)
}


def topology_name(level: int) -> str:
    return TOPOLOGY_NAMES.get(int(level), f"LEVEL{int(level)}")

"""DRA: DeviceClass generation, CEL selector evaluation, device prediction, capacity."""

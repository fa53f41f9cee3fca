"""Pipeline settings in one import: the specs (:mod:`lakehouse_core.specs`) and the TOML loader
that builds them (:mod:`lakehouse_core.loader`). Code outside ``lakehouse_core`` imports settings
from here."""

from lakehouse_core.expects import QUALITY_ACTIONS, Expectation, QualityAction, require_action
from lakehouse_core.loader import (
    alerts_from,
    catalog_from,
    config_from_mapping,
    config_from_toml,
    load_config,
    maintenance_from,
    parse_toml,
    quality_from,
    table_from,
)
from lakehouse_core.specs import (
    INCOMPATIBLE_TYPE_POLICIES,
    SCD_TYPES,
    TABLE_FORMATS,
    CatalogSpec,
    ConditionSetting,
    DebeziumSpec,
    IncompatibleTypePolicy,
    MaintenanceSpec,
    PipelineConfig,
    QualitySpec,
    TableFormat,
    TableSpec,
)

__all__ = [
    "INCOMPATIBLE_TYPE_POLICIES",
    "QUALITY_ACTIONS",
    "SCD_TYPES",
    "TABLE_FORMATS",
    "CatalogSpec",
    "ConditionSetting",
    "DebeziumSpec",
    "Expectation",
    "IncompatibleTypePolicy",
    "MaintenanceSpec",
    "PipelineConfig",
    "QualityAction",
    "QualitySpec",
    "TableFormat",
    "TableSpec",
    "alerts_from",
    "catalog_from",
    "config_from_mapping",
    "config_from_toml",
    "load_config",
    "maintenance_from",
    "parse_toml",
    "quality_from",
    "require_action",
    "table_from",
]

"""Hydra's search-path plug-in mechanism: puts this package's conf/ on every facet_probe app's search path."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class FpToyPluginSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="fp-toy-plugin", path="pkg://fp_toy_plugin.conf")

"""Config lookups (`load_option`, `available`) are kept per process and stay true to the files on the search
path."""

from __future__ import annotations

from hydra import initialize_config_dir, initialize_config_module

from facet_probe.config.loading import available, load_option


def test_a_user_config_edited_between_two_lookups_is_read_anew(tmp_path):
    """Lookups are kept per process (an experiment names the same configs again and again); an edited file on the
    search path is composed again, never served from what was kept."""
    (tmp_path / "model").mkdir()
    config = tmp_path / "model" / "mine.yaml"
    config.write_text("name: mine\nmodel_id: first\n")
    with initialize_config_dir(str(tmp_path), version_base="1.3"):
        assert load_option("model", "mine").model_id == "first"
        config.write_text("name: mine\nmodel_id: second-one\n")
        assert load_option("model", "mine").model_id == "second-one"
        (tmp_path / "model" / "other.yaml").write_text("name: other\n")
        assert "other" in available("model")


def test_what_a_lookup_returns_is_the_callers_own():
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        first = load_option("model", "oracle")
        first.name = "changed by the caller"
        assert load_option("model", "oracle").name == "oracle"

"""Each adapter, on its real SDK, puts the configured model, settings and ordered parts on the wire.

What was sent is read back from the loopback fake provider, never from our own objects.
"""

from __future__ import annotations

import hashlib

import pytest
from api_test_helpers import interleaved_prompt, make_runner, url_for
from hydra.errors import InstantiationException

from facet_probe.core.items import ImageRef
from facet_probe.core.prompts import ImagePart, Message, Prompt, TextPart
from facet_probe.core.trials import fingerprint_hash
from facet_probe.runners.base import Request, RunnerError, generate_all
from facet_probe_dev.testing.fake_providers import FakeProviderServer, field_of

CONFIGS = [
    "gemini_31_pro",
    "gemini_3_flash",
    "claude_opus_47",
    "claude_sonnet_46",
    "gpt_55",
    "gpt_54_mini",
    "openai_compat",
]
MODEL_IDS = {
    "gemini_31_pro": "gemini-3.1-pro-preview",
    "gemini_3_flash": "gemini-3-flash-preview",
    "claude_opus_47": "claude-opus-4-7",
    "claude_sonnet_46": "claude-sonnet-4-6",
    "gpt_55": "gpt-5.5",
    "gpt_54_mini": "gpt-5.4-mini",
    "openai_compat": "served-model",
}


def wire_settings(call) -> dict:
    """The generation settings as the provider received them, in one flat vocabulary."""
    body = call.body
    if call.provider == "gemini":
        gen = field_of(body, "generation_config") or {}
        think = field_of(gen, "thinking_config") or {}
        return {
            "temperature": gen.get("temperature"),
            "top_p": field_of(gen, "top_p"),
            "max_tokens": field_of(gen, "max_output_tokens"),
            "seed": gen.get("seed"),
            "thinking_budget": field_of(think, "thinking_budget"),
        }
    if call.provider == "anthropic":
        return {
            "temperature": body.get("temperature"),
            "top_p": body.get("top_p"),
            "max_tokens": body.get("max_tokens"),
            "seed": body.get("seed"),
            "thinking": body.get("thinking"),
        }
    if call.provider == "openai_responses":
        return {
            "temperature": body.get("temperature"),
            "top_p": body.get("top_p"),
            "max_tokens": body.get("max_output_tokens"),
            "seed": body.get("seed"),
            "reasoning": body.get("reasoning"),
            "store": body.get("store"),
        }
    return {
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "max_tokens": body.get("max_tokens"),
        "seed": body.get("seed"),
    }


EXPECTED_WIRE = {  # the paper's settings where the API takes them, as issue 5 asks
    "gemini_31_pro": {
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 24576,
        "seed": 7,
        "thinking_budget": 8192,
    },
    "gemini_3_flash": {
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 24576,
        "seed": 7,
        "thinking_budget": 8192,
    },
    "claude_opus_47": {
        "temperature": None,
        "top_p": None,
        "max_tokens": 16384,
        "seed": None,
        "thinking": {"type": "adaptive"},
    },
    "claude_sonnet_46": {
        "temperature": None,
        "top_p": None,
        "max_tokens": 16384,
        "seed": None,
        "thinking": {"type": "enabled", "budget_tokens": 8192},
    },
    "gpt_55": {
        "temperature": None,
        "top_p": None,
        "max_tokens": 8192,
        "seed": None,
        "reasoning": {"effort": "medium"},
        "store": False,
    },
    "gpt_54_mini": {
        "temperature": None,
        "top_p": None,
        "max_tokens": 8192,
        "seed": None,
        "reasoning": {"effort": "medium"},
        "store": False,
    },
    "openai_compat": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 512, "seed": 7},
}
EXPECTED_OMITTED = {
    "gemini_31_pro": set(),
    "gemini_3_flash": set(),
    "claude_opus_47": {"temperature", "top_p", "thinking.budget_tokens", "seed"},
    "claude_sonnet_46": {"temperature", "top_p", "seed"},
    "gpt_55": {"temperature", "top_p", "seed"},
    "gpt_54_mini": {"temperature", "top_p", "seed"},
    "openai_compat": set(),
}


@pytest.fixture(scope="module")
def server():
    with FakeProviderServer(served_models=("served-model",)) as srv:
        yield srv


@pytest.mark.parametrize("config", CONFIGS)
def test_adapter_sends_model_settings_system_and_images_in_display_order(config, server, api_keys, images):
    runner = make_runner(config, url_for(config, server.url))
    runner.check_ready()
    before = len(server.calls)
    prompt = interleaved_prompt(images, tag=config)
    out = generate_all(runner, [Request(key="k1", prompt=prompt, seed=7)])
    (call,) = server.calls[before:]

    assert out["k1"].error is None
    assert call.model == MODEL_IDS[config]
    assert wire_settings(call) == EXPECTED_WIRE[config]
    assert call.system == "Answer with one word."
    red, green, blue = images
    assert call.parts == [
        ("text", f"Evidence {config}:"),
        ("image", blue.sha256),
        ("text", "then"),
        ("image", red.sha256),
        ("image", green.sha256),
        ("text", f"Which colour came first? {config}"),
    ]
    assert call.mime_types == ["image/png", "image/png", "image/jpeg"]
    assert call.api_key is not None  # the key from the environment authenticated the call


@pytest.mark.parametrize("config", CONFIGS)
def test_adapter_reads_text_thinking_usage_and_records_provenance(config, server, api_keys, images):
    runner = make_runner(config, url_for(config, server.url))
    before = len(server.calls)
    resp = generate_all(runner, [Request(key="k", prompt=interleaved_prompt(images, "p"), seed=3)])["k"]
    (call,) = server.calls[before:]

    assert resp.text == call.reply
    wants_thinking = config.startswith(("gemini", "claude"))  # include_thoughts / thinking blocks requested
    assert resp.thinking == (server.thinking_text if wants_thinking else None)
    assert resp.usage["input_tokens"] > 0 and resp.usage["output_tokens"] > 0
    prices = runner.prices
    expected_cost = (
        resp.usage["input_tokens"] * prices.input_per_mtok
        + resp.usage["output_tokens"] * prices.output_per_mtok
    ) / 1e6
    assert resp.provenance["cost_usd"] == pytest.approx(expected_cost, rel=1e-6)
    prov = resp.provenance
    assert prov["model_id"] == MODEL_IDS[config]
    assert (
        prov["sdk"].split("==")[0] in ("google-genai", "anthropic", "openai") and "unknown" not in prov["sdk"]
    )
    assert set(prov["settings_omitted"]) == EXPECTED_OMITTED[config]
    assert all(entry["reason"] for entry in prov["settings_omitted"].values())
    assert not set(prov["settings_sent"]) & set(prov["settings_omitted"])
    assert prov["attempts"] == 1 and resp.latency_s > 0


def test_claude_opus_records_the_paper_budget_it_cannot_send(server, api_keys, images):
    runner = make_runner("claude_opus_47", server.url)
    prov = generate_all(runner, [Request(key="k", prompt=interleaved_prompt(images))])["k"].provenance
    omitted = prov["settings_omitted"]["thinking.budget_tokens"]
    assert omitted["value"] == 8192 and "adaptive" in omitted["reason"]
    assert prov["settings_omitted"]["temperature"]["value"] == 0.0


@pytest.mark.parametrize("config", CONFIGS)
def test_fingerprint_has_model_and_every_setting_and_tracks_changes(config, server, api_keys):
    runner = make_runner(config, url_for(config, server.url))
    fp = runner.fingerprint()
    assert fp["model_id"] == MODEL_IDS[config]
    assert fp["settings_sent"] == runner.settings_sent
    assert set(fp["settings_omitted"]) == set(runner.settings_omitted)
    assert not any(key in repr(fp) for key in api_keys.values())
    bumped = make_runner(config, url_for(config, server.url), **{"model_id": "other-model"})
    assert fingerprint_hash(bumped.fingerprint()) != fingerprint_hash(fp)


@pytest.mark.parametrize(
    "config,path,value",
    [
        ("gemini_31_pro", "generation.temperature", 0.5),
        ("claude_sonnet_46", "generation.thinking.budget_tokens", 4096),
        ("gpt_55", "generation.reasoning.effort", "high"),
        ("openai_compat", "generation.max_tokens", 100),
    ],
)
def test_changing_a_generation_setting_changes_the_fingerprint(config, path, value, server, api_keys):
    a = make_runner(config, url_for(config, server.url))
    b = make_runner(config, url_for(config, server.url), **{path: value})
    assert fingerprint_hash(a.fingerprint()) != fingerprint_hash(b.fingerprint())


def test_multi_turn_roles_reach_each_provider_in_order(server, api_keys):
    prompt = Prompt(
        system="s",
        messages=(
            Message("user", (TextPart("q1"),)),
            Message("assistant", (TextPart("a1"),)),
            Message("user", (TextPart("q2"),)),
        ),
    )
    expected = {
        "gemini_31_pro": ["user", "model", "user"],
        "claude_sonnet_46": ["user", "assistant", "user"],
        "gpt_55": ["user", "assistant", "user"],
        "openai_compat": ["user", "assistant", "user"],
    }
    for config, roles in expected.items():
        runner = make_runner(config, url_for(config, server.url))
        generate_all(runner, [Request(key="k", prompt=prompt)])
        assert server.calls[-1].roles == roles, config
        assert server.calls[-1].texts() == ["q1", "a1", "q2"], config


def test_claude_rejects_a_thinking_budget_not_below_max_tokens(server, api_keys):
    with pytest.raises(InstantiationException, match="budget_tokens .* below max_tokens"):
        make_runner("claude_sonnet_46", server.url, **{"generation.thinking.budget_tokens": 16384})


def test_unknown_settings_fail_at_construction_with_the_setting_named(server, api_keys):
    with pytest.raises(InstantiationException, match="temprature"):
        make_runner("gpt_55", server.url + "/v1", **{"generation.temprature": 0.0})
    with pytest.raises(InstantiationException, match="GenerateContentConfig"):
        make_runner("gemini_31_pro", server.url, **{"generation.temprature": 0.0})


def test_an_unsupported_image_format_is_a_clear_error_response_not_a_call(server, api_keys):
    bmp = ImageRef.from_bytes(b"BM" + bytes(60))
    prompt = Prompt(system="", messages=(Message("user", (TextPart("look"), ImagePart(bmp))),))
    runner = make_runner("gpt_55", server.url + "/v1")
    before = len(server.calls)
    resp = generate_all(runner, [Request(key="k", prompt=prompt)])["k"]
    assert "unsupported image format" in resp.error and resp.text == ""
    assert len(server.calls) == before


def test_openai_compat_checks_the_served_model_and_runs_keyless(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeProviderServer(served_models=("served-model",)) as srv:
        runner = make_runner("openai_compat", srv.url + "/v1")
        runner.check_ready()  # keyless is fine for a self-hosted server
        generate_all(
            runner,
            [Request(key="k", prompt=Prompt(system="", messages=(Message("user", (TextPart("hi"),)),)))],
        )
        assert srv.calls[-1].api_key == "EMPTY"
        wrong = make_runner("openai_compat", srv.url + "/v1", **{"model_id": "not-served"})
        with pytest.raises(RunnerError, match="does not serve 'not-served'"):
            wrong.check_ready()
    with pytest.raises(RunnerError, match="base_url"):
        make_runner("openai_compat", None).check_ready()


def test_openai_compat_splits_a_leading_think_block_from_the_answer(api_keys):
    def reply(call):
        return "<think>weighing chunk order</think>\nAnswer: B"

    with FakeProviderServer(reply=reply) as srv:
        runner = make_runner("openai_compat", srv.url + "/v1", verify_model=False)
        resp = generate_all(
            runner,
            [Request(key="k", prompt=Prompt(system="", messages=(Message("user", (TextPart("hi"),)),)))],
        )["k"]
    assert resp.text == "Answer: B" and resp.thinking == "weighing chunk order"


def test_the_fake_server_decodes_exactly_the_image_bytes_sent(server, api_keys, images):
    runner = make_runner("claude_sonnet_46", server.url)
    generate_all(runner, [Request(key="k", prompt=interleaved_prompt(images))])
    digests = server.calls[-1].image_digests()
    assert digests == [hashlib.sha256(images[i].read_bytes()).hexdigest() for i in (2, 0, 1)]


@pytest.mark.parametrize("config", CONFIGS)
def test_every_api_model_config_declares_the_model_contract(config):
    from api_test_helpers import MODEL_CONF
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(MODEL_CONF / f"{config}.yaml")
    assert cfg.name == config and cfg._target_.startswith("facet_probe.runners.api.")
    assert cfg.revision is None and cfg.local_path is None
    assert OmegaConf.is_missing(cfg, "base_url") or cfg.base_url is None
    assert set(cfg.prices) >= {"input_per_mtok", "output_per_mtok"}
    assert set(cfg.concurrency) >= {"max_in_flight", "initial", "max_retries", "timeout_s"}
    assert all(key in cfg.generation or OmegaConf.is_dict(cfg.omit[key]) for key in cfg.omit)

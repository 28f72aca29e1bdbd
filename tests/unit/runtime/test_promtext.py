"""The one Prometheus text parser: sample lines, labels, comments."""

from __future__ import annotations

from tierctl.runtime.promtext import metric_total, parse_metrics


def test_samples_labels_and_comments() -> None:
    text = (
        "# HELP vllm:num_requests_running Running.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m",engine="0"} 2.0\n'
        'vllm:num_requests_running{model_name="m",engine="1"} 1.0\n'
        "process_start_time_seconds 1.70000000012e+09\n"
        "not a sample line\n"
        "bad_value{} NaNish\n"
    )
    samples = parse_metrics(text)
    assert [s.name for s in samples] == ["vllm:num_requests_running"] * 2 + [
        "process_start_time_seconds"
    ]
    assert samples[0].labels == {"model_name": "m", "engine": "0"}
    assert samples[2].value == 1.70000000012e09
    assert samples[2].value_text == "1.70000000012e+09"
    assert metric_total(samples, "vllm:num_requests_running") == 3.0


def test_a_label_value_may_hold_a_closing_brace_and_escaped_quotes() -> None:
    # vLLM's cache_config_info carries configuration values as labels.
    text = 'vllm:cache_config_info{block_size="16",extra="{\\"a\\": 1}",x="}"} 1.0\n'
    (sample,) = parse_metrics(text)
    assert sample.labels == {"block_size": "16", "extra": '{\\"a\\": 1}', "x": "}"}
    assert sample.value == 1.0

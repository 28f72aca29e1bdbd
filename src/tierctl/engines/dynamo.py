"""NVIDIA Dynamo's engine workers: ``python3 -m dynamo.vllm`` and ``python3 -m dynamo.sglang``
run the engine's own argument parser (vLLM's ``AsyncEngineArgs``, SGLang's ``ServerArgs``)
beside a group of Dynamo's flags (``--is-prefill-worker``, ``--disaggregation-mode``,
``--connector``, the KV router's and the runtime's). A Dynamo image's tag names Dynamo's
release, never the engine's.

The flag sets are every option string that Dynamo's worker argument modules define, read
(by their AST: ``add_argument`` / ``add_negatable_bool_argument`` calls and ``--`` string
constants) from the published wheels ``ai-dynamo`` 0.5.1, 0.8.1, 1.0.2 and 1.6.1 (PyPI;
``dynamo/{vllm,sglang}/*args*.py`` and ``dynamo/common/configuration``), their union: a
DynamoGraphDeployment's image is usually ``${VERSION}``, so which Dynamo release parses the
argv is unknown, and a flag Dynamo has had is never called a typo. Every other flag is the
engine's and is judged by the engine's catalog.
"""

from __future__ import annotations

#: What a Dynamo worker's launcher is called in messages.
TITLE = "NVIDIA Dynamo"

#: The worker modules per engine (``python3 -m MODULE``): ``dynamo.sglang.worker`` and
#: ``dynamo.sglang.decode_worker`` are the 0.3/0.4 spellings, deprecated in 0.4.
VLLM_WORKER_MODULES = ("dynamo.vllm",)
SGLANG_WORKER_MODULES = ("dynamo.sglang", "dynamo.sglang.worker", "dynamo.sglang.decode_worker")


def worker_launchers(modules: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """``python3 -m MODULE`` and ``python -m MODULE`` for each module."""
    return tuple((python, "-m", module) for module in modules for python in ("python3", "python"))


VLLM_WORKER_FLAGS = frozenset(
    """
    --active-decode-blocks-threshold --active-prefill-tokens-threshold
    --active-prefill-tokens-threshold-frac --admission-control --ais-perf-config
    --allgather-degree --assume-kv-reuse --benchmark-collect-imbalanced
    --benchmark-decode-batch-granularity --benchmark-decode-length-granularity
    --benchmark-hybrid-live-state --benchmark-max-batch-size --benchmark-mode
    --benchmark-output-path --benchmark-points-file
    --benchmark-prefill-batch-granularity --benchmark-prefill-granularity
    --benchmark-prefill-kv-read-granularity --benchmark-randomize-kda-state
    --benchmark-timeout --benchmark-warmup-iterations --boundary-ratio --cache-backend
    --cache-config --cfg-parallel-size --classify-worker --config --connector
    --custom-encoder-class --custom-jinja-template --decode-max-batch-size-samples
    --decode-max-kv-read-token-samples --default-video-fps --diffusion-attention-backend
    --disable-log-stats --disaggregation-mode --discovery-backend --dump-config-to
    --durable-kv-events --dyn-default-thinking-mode --dyn-enable-structural-tag
    --dyn-endpoint-types --dyn-reasoning-parser --dyn-structural-tag
    --dyn-structural-tag-schema --dyn-structural-tag-scope --dyn-tool-call-parser
    --dynamo-port-max --dynamo-port-min --embedding-frontend-tokenization
    --embedding-transfer-mode --embedding-worker --embedding-worker-processes
    --enable-cache-dit-summary --enable-cpu-offload --enable-layerwise-offload
    --enable-local-indexer --enable-multimodal --enable-rl --enable-session-prefix-index
    --endpoint --endpoint-types --enforce-disagg --enforce-eager --engine-request-limit
    --event-plane --exclude-tools-when-tool-choice-none --fastvideo-vsa-topk
    --flow-shift --fpm-trace --frontend-decoding --gms-shadow-mode --headless
    --health-check-payload --hsdp-replicate-size --hsdp-shard-size --http-concurrency
    --http-connect-timeout --http-keepalive-timeout --http-max-connections
    --http-max-keepalive --http-pool-timeout --http-timeout --is-decode-worker
    --is-prefill-worker --kv-events --kv-overlap-score-weight --kv-state-endpoint
    --layerwise-num-gpu-layers --load-aware --lora-path --media-output-fs-url
    --media-output-http-url --migration-limit --mm-prompt-template --model
    --model-express-url --multimodal-decode-worker
    --multimodal-embedding-cache-capacity-gb --multimodal-embedding-cache-publisher
    --multimodal-encode-prefill-worker --multimodal-encode-worker --multimodal-processor
    --multimodal-worker --namespace --nats-tls-ca-cert-path --nats-tls-client-cert-path
    --nats-tls-client-key-path --nats-tls-insecure --no-benchmark-collect-imbalanced
    --no-benchmark-hybrid-live-state --no-benchmark-randomize-kda-state
    --no-classify-worker --no-durable-kv-events --no-dyn-enable-structural-tag
    --no-embedding-frontend-tokenization --no-embedding-worker
    --no-enable-cache-dit-summary --no-enable-cpu-offload --no-enable-layerwise-offload
    --no-enable-multimodal --no-enable-rl --no-enable-session-prefix-index
    --no-enforce-eager --no-exclude-tools-when-tool-choice-none --no-fpm-trace
    --no-frontend-decoding --no-gms-shadow-mode --no-headless --no-is-decode-worker
    --no-is-prefill-worker --no-load-aware --no-multimodal-decode-worker
    --no-multimodal-embedding-cache-publisher --no-multimodal-encode-worker
    --no-multimodal-worker --no-nats-tls-insecure --no-omni
    --no-omni-enable-cache-dit-summary --no-omni-enable-cpu-offload
    --no-omni-enable-layerwise-offload --no-omni-enforce-eager --no-omni-router
    --no-omni-vae-use-slicing --no-omni-vae-use-tiling --no-realtime
    --no-route-to-encoder --no-router-assume-kv-reuse --no-router-conditional-disagg
    --no-router-kv-events --no-router-replica-sync --no-router-track-active-blocks
    --no-router-track-output-blocks --no-router-track-prefill-tokens
    --no-tcp-tls-insecure --no-ulysses-a2a-permute --no-use-hsdp --no-use-remote-indexer
    --no-use-vllm-tokenizer --no-vae-use-slicing --no-vae-use-tiling --omni
    --omni-boundary-ratio --omni-cfg-parallel-size --omni-diffusion-cache-backend
    --omni-diffusion-cache-config --omni-enable-cache-dit-summary
    --omni-enable-cpu-offload --omni-enable-layerwise-offload --omni-enforce-eager
    --omni-flow-shift --omni-layerwise-num-gpu-layers --omni-ring-degree --omni-router
    --omni-ulysses-degree --omni-vae-use-slicing --omni-vae-use-tiling
    --output-modalities --prefill-max-kv-read-token-samples
    --prefill-max-new-token-samples --prefix-max-batch-size-samples --realtime
    --request-plane --response-plane --revision --ring-degree --route-to-encoder
    --router-approximate-cache-policy --router-assume-kv-reuse
    --router-conditional-disagg --router-conditional-disagg-config
    --router-decode-active-request-weight --router-decode-policy
    --router-disk-cache-hit-weight --router-event-threads --router-host-cache-hit-weight
    --router-kv-events --router-kv-overlap-score-credit
    --router-kv-overlap-score-credit-decay --router-kv-overlap-score-weight
    --router-min-initial-workers --router-mode --router-policy-config
    --router-predicted-ttl-secs --router-prefill-load-model --router-prefill-load-scale
    --router-prefill-policy --router-queue-policy --router-queue-threshold
    --router-replica-sync --router-session-affinity-mode
    --router-session-affinity-ttl-secs --router-temperature --router-track-active-blocks
    --router-track-output-blocks --router-track-prefill-tokens --router-tracking-hash
    --router-tracking-key-file --router-tracking-key-id --router-ttl-secs
    --served-model-name --shared-cache-multiplier --shared-cache-type --sleep-mode-level
    --stage-configs-path --stage-id --store-kv --task-type --tcp-tls-ca-cert-path
    --tcp-tls-cert-path --tcp-tls-client-ca-cert-path --tcp-tls-client-cert-path
    --tcp-tls-client-key-path --tcp-tls-handshake-timeout --tcp-tls-insecure
    --tcp-tls-key-path --tcp-tls-server-name --text-encoder-tp-size
    --track-active-blocks --track-output-blocks --trust-remote-code
    --tts-max-instructions-length --tts-max-new-tokens-max --tts-max-new-tokens-min
    --tts-ref-audio-max-bytes --tts-ref-audio-timeout --ulysses-a2a-permute
    --ulysses-degree --use-hsdp --use-remote-indexer --use-vllm-tokenizer
    --vae-parallel-mode --vae-patch-parallel-size --vae-use-slicing --vae-use-tiling
    --version
    """.split()  # noqa: SIM905 (a word list as read from the wheels)
)

SGLANG_WORKER_FLAGS = frozenset(
    """
    --active-decode-blocks-threshold --active-prefill-tokens-threshold
    --active-prefill-tokens-threshold-frac --admission-control --ais-perf-config
    --assume-kv-reuse --config --config-key --connector --custom-jinja-template
    --dedicated-mm-encoder --disagg-config --disagg-config-key
    --disaggregation-bootstrap-port --disaggregation-mode --discovery-backend
    --dump-config-to --durable-kv-events --dyn-default-thinking-mode
    --dyn-enable-structural-tag --dyn-endpoint-types --dyn-reasoning-parser
    --dyn-structural-tag --dyn-structural-tag-schema --dyn-structural-tag-scope
    --dyn-tool-call-parser --embedding-transfer-mode --embedding-worker
    --enable-local-indexer --enable-multimodal --enable-rl --enable-session-prefix-index
    --endpoint --endpoint-types --enforce-disagg --engine-request-limit --engine-route
    --event-plane --exclude-tools-when-tool-choice-none --fpm-trace --frontend-decoding
    --gateway-workers --health-check-payload --http-concurrency --http-connect-timeout
    --http-keepalive-timeout --http-max-connections --http-max-keepalive
    --http-pool-timeout --http-timeout --image-diffusion-worker --kv-events
    --kv-overlap-score-weight --kv-state-endpoint --load-aware --media-output-fs-url
    --media-output-http-url --migration-limit --multimodal-embedding-cache-capacity-gb
    --multimodal-embedding-cache-publisher --multimodal-encode-worker
    --multimodal-processor --multimodal-worker --namespace --nats-tls-ca-cert-path
    --nats-tls-client-cert-path --nats-tls-client-key-path --nats-tls-insecure
    --no-dedicated-mm-encoder --no-durable-kv-events --no-dyn-enable-structural-tag
    --no-embedding-worker --no-enable-multimodal --no-enable-rl
    --no-enable-session-prefix-index --no-exclude-tools-when-tool-choice-none
    --no-fpm-trace --no-frontend-decoding --no-image-diffusion-worker --no-load-aware
    --no-multimodal-embedding-cache-publisher --no-multimodal-encode-worker
    --no-multimodal-processor --no-multimodal-worker --no-nats-tls-insecure
    --no-rerank-worker --no-router-assume-kv-reuse --no-router-conditional-disagg
    --no-router-kv-events --no-router-replica-sync --no-router-track-active-blocks
    --no-router-track-output-blocks --no-router-track-prefill-tokens
    --no-tcp-tls-insecure --no-use-remote-indexer --no-use-sglang-tokenizer
    --no-video-generation-worker --output-modalities --request-plane --rerank-worker
    --response-plane --router-approximate-cache-policy --router-assume-kv-reuse
    --router-conditional-disagg --router-conditional-disagg-config
    --router-decode-active-request-weight --router-decode-policy
    --router-disk-cache-hit-weight --router-event-threads --router-host-cache-hit-weight
    --router-kv-events --router-kv-overlap-score-credit
    --router-kv-overlap-score-credit-decay --router-kv-overlap-score-weight
    --router-min-initial-workers --router-mode --router-policy-config
    --router-predicted-ttl-secs --router-prefill-load-model --router-prefill-load-scale
    --router-prefill-policy --router-queue-policy --router-queue-threshold
    --router-replica-sync --router-session-affinity-mode
    --router-session-affinity-ttl-secs --router-temperature --router-track-active-blocks
    --router-track-output-blocks --router-track-prefill-tokens --router-tracking-hash
    --router-tracking-key-file --router-tracking-key-id --router-ttl-secs
    --sglang-trace-level --shared-cache-multiplier --shared-cache-type --store-kv
    --tcp-tls-ca-cert-path --tcp-tls-cert-path --tcp-tls-client-ca-cert-path
    --tcp-tls-client-cert-path --tcp-tls-client-key-path --tcp-tls-handshake-timeout
    --tcp-tls-insecure --tcp-tls-key-path --tcp-tls-server-name --track-active-blocks
    --track-output-blocks --use-remote-indexer --use-sglang-tokenizer --version
    --video-generation-worker
    """.split()  # noqa: SIM905 (a word list as read from the wheels)
)

"""Configuration of the train stage."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from eagle3_core.base import StageConfig, StrictModel
from eagle3_core.drafter.kinds import KINDS, KindName


class OnlineVllmConfig(StrictModel):
    """Where train.mode online-vllm gets its states: an extraction engine writing into a bounded spool."""

    engine: Literal["vllm", "transformers"] = Field(
        "vllm",
        description="vllm: the extract stage's vLLM engine (a target only a serving engine holds); transformers: the target in-process on `device` (small targets, tests).",
    )
    endpoint: str | None = Field(
        None,
        description="An engine already running: its spool folder (`python -m eagle3_core.stages.train.online_engine serve --spool DIR ...`), or its URL `http://HOST:PORT` (the same command with `--http HOST:PORT`; units are copied into spool_dir); None = the stage starts the engine and stops it with the run.",
    )
    spool_dir: str | None = Field(
        None,
        description="Spool folder of an engine the stage starts, or the local copy of a URL endpoint's units; None = drafter/spool. Put it on a fast local disk.",
    )
    spool_gb: float = Field(
        16.0,
        gt=0,
        description="Byte budget of the spool in GiB: the engine waits when it is full. Epochs after the first reuse the states it can keep (all when the whole dataset fits) and recompute the others.",
    )
    engine_devices: str | None = Field(
        None,
        description="CUDA_VISIBLE_DEVICES of the engine, e.g. `0,1,2,3` (kept apart from train_devices); None = inherited.",
    )
    train_devices: str | None = Field(
        None, description="CUDA_VISIBLE_DEVICES of the DeepSpeed trainer, e.g. `4,5,6,7`; None = inherited."
    )
    device: str = Field("auto", description="Device of the transformers engine: `auto`, `cpu`, `cuda`, `cuda:N`.")
    max_tokens_per_batch: int = Field(
        16384, ge=1, description="Token budget per forward batch of the transformers engine (vLLM batches by itself)."
    )
    vllm_python: str | None = Field(None, description="Python of the vLLM environment; None = as extract.vllm_python.")
    vllm_kv_cache_bytes: int | None = Field(
        None, ge=1 << 20, description="vLLM KV-cache bytes; None = vLLM's GPU memory share on a GPU, 256 MiB on CPU."
    )
    vllm_tensor_parallel_size: int = Field(1, ge=1, description="vLLM tensor parallel size.")
    wait_timeout_s: float = Field(
        1800.0, gt=0, description="The trainer fails when the engine shows no sign of life (heartbeat) for this long."
    )

    def vllm_options(self):
        """The vLLM engine's start options from the ``vllm_*`` fields (as ``ExtractConfig.vllm_options``)."""
        from eagle3_core.states.engines.vllm_engine import VllmOptions

        return VllmOptions(
            python=self.vllm_python,
            kv_cache_bytes=self.vllm_kv_cache_bytes,
            tensor_parallel_size=self.vllm_tensor_parallel_size,
        )


class DrafterShape(StrictModel):
    """The drafter's attention and MLP widths where they should not copy the target's.

    A dense target's drafter copies its heads and MLP width. An MoE/MLA target (Kimi-K2.5,
    DeepSeek-V3, Qwen3-MoE) has no dense shape worth copying: MLA's 64 heads x 112 with 64 KV heads
    would give the drafter 7x the KV cache per token of the public drafters, which use GQA
    (benchmarks/train.md, "Drafter shapes"). The hidden size is always the target's.
    """

    num_attention_heads: int | None = Field(None, ge=1, description="Query heads; None = the target's.")
    num_key_value_heads: int | None = Field(
        None, ge=1, description="KV heads (GQA); must divide num_attention_heads; None = the target's."
    )
    head_dim: int | None = Field(
        None, ge=8, description="Per-head width (even: rotary); None = the target's (or hidden_size / heads)."
    )
    intermediate_size: int | None = Field(None, ge=1, description="MLP width; None = the target's intermediate_size.")

    @model_validator(mode="after")
    def _heads_group(self) -> "DrafterShape":
        heads, kv = self.num_attention_heads, self.num_key_value_heads
        if heads is not None and kv is not None and heads % kv:
            raise ValueError(
                f"train.drafter.num_key_value_heads ({kv}) must divide num_attention_heads ({heads}); "
                "pick a KV head count such as 8 that divides it"
            )
        if self.head_dim is not None and self.head_dim % 2:
            raise ValueError(f"train.drafter.head_dim must be even (rotary halves), got {self.head_dim}")
        return self


TrackingBackend = Literal["tensorboard", "wandb", "mlflow"]


class TrackingConfig(StrictModel):
    """Where ``report_to``'s backends write; none of it changes the trained weights."""

    project: str = Field("eagle3", description="W&B project and MLflow experiment name.")
    run_name: str | None = Field(
        None, description="Run name shown by W&B and MLflow; None = the drafter folder's run directory name."
    )
    wandb_entity: str | None = Field(None, description="W&B entity (team or user); None = the key's default.")
    wandb_mode: Literal["auto", "online", "offline"] = Field(
        "auto",
        description="auto = $WANDB_MODE when set, else online when an API key is there and api.wandb.ai answers within 3 s, else offline (files under drafter/wandb/, `wandb sync` uploads them): a run never waits on W&B.",
    )
    mlflow_tracking_uri: str | None = Field(
        None,
        description="MLflow tracking URI; None = $MLFLOW_TRACKING_URI, else a local store drafter/mlflow.db (sqlite) with artifacts in drafter/mlflow-artifacts/.",
    )
    base_model: str | None = Field(
        None,
        description="The target's hub name for the model card's `base_model`, its launch lines and the runs; None = a hub id (org/name) among the model name generate recorded and the target's config.json `_name_or_path`, else the first of them that is a name, else the target folder's name; never a local path.",
    )
    hub_repo: str | None = Field(
        None,
        description="The hub repository the export is uploaded to (org/name): the model card's vLLM and SGLang lines load the drafter from it; None = a placeholder the card says to replace. Never a local path: the card travels.",
    )
    recipe_hash: SkipJsonSchema[str | None] = Field(  # the run fills it in: no field of a form
        None,
        description="Hash of the pipeline recipe this drafter comes from; filled in by the pipeline (PipelineConfig.recipe_hash), None for a train stage run on its own.",
    )


Loader = Literal["vllm", "sglang"]

# What each engine's llama_eagle3.py reads of the variant keys (vLLM 0.32; SGLang's of 2026, the
# version that reads `fc_norm`): that SGLang has no `norm_before_fc` (it would load the export and
# silently skip the norm, serving another model than the one trained). SGLang PR 32334 (2026-07)
# reads `eagle_config.norm_before_fc`, where the export writes it too, under a weight name not
# verified here: list sglang in train.variant.loaders only for what is known to load.
LOADER_READS: dict[str, frozenset[str]] = {
    "vllm": frozenset({"fc_norm", "norm_output", "norm_before_fc", "num_hidden_layers"}),
    "sglang": frozenset({"fc_norm", "norm_output", "num_hidden_layers"}),
}
PRESETS: dict[str, dict[str, bool]] = {
    "eagle3": {"fc_norm": False, "norm_output": False},
    "eagle3.1": {"fc_norm": True, "norm_output": True},  # a norm per aux state, the post-norm state fed back
}


class DrafterVariant(StrictModel):
    """The drafter's architecture: EAGLE-3, EAGLE-3.1, a norm before fc, and its depth.

    Every field is written to ``export/config.json`` under the key the engines read, so the served
    drafter is the trained one; a variant one of ``loaders`` cannot read is a config error.
    """

    preset: Literal["eagle3", "eagle3.1"] = Field(
        "eagle3",
        description="eagle3: as published; eagle3.1: fc_norm and norm_output on (the fields below override it).",
    )
    fc_norm: bool | None = Field(
        None, description="An RMSNorm on each auxiliary state before fc (EAGLE-3.1); None = the preset's."
    )
    norm_output: bool | None = Field(
        None,
        description="Feed the post-norm state back as the next draft step's hidden (EAGLE-3.1); None = the preset's.",
    )
    norm_before_fc: bool = Field(
        False, description="One RMSNorm over the three concatenated auxiliary states before fc (vLLM only)."
    )
    num_hidden_layers: int = Field(
        1, ge=1, le=8, description="Decoder layers: the first reads [embed; hidden], the others are Llama blocks."
    )
    loaders: list[Loader] = Field(
        default_factory=lambda: ["vllm"],
        min_length=1,
        description="Engines the export must load in (vLLM is the one evaluate serves); add sglang to refuse a variant key SGLang does not read (norm_before_fc).",
    )

    def architecture(self) -> dict[str, bool | int]:
        """The model's fields (``DrafterConfig``): the preset with the explicit fields over it."""
        chosen = {k: v for k, v in {"fc_norm": self.fc_norm, "norm_output": self.norm_output}.items() if v is not None}
        return {
            **PRESETS[self.preset],
            **chosen,
            "norm_before_fc": self.norm_before_fc,
            "num_hidden_layers": self.num_hidden_layers,
        }

    @model_validator(mode="after")
    def _loaders_read_it(self) -> "DrafterVariant":
        used = {k for k, v in self.architecture().items() if v and (k != "num_hidden_layers" or v > 1)}
        for loader in self.loaders:
            unread = sorted(used - LOADER_READS[loader])
            if unread:
                raise ValueError(
                    f"train.variant.{unread[0]}: {loader}'s LlamaForCausalLMEagle3 does not read it, so it would "
                    f"serve another drafter than the one trained; drop it, or set train.variant.loaders without {loader}"
                )
        return self


class DFlashTrainConfig(StrictModel):
    """A DFlash block drafter (train.kind: dflash): its block, depth and mask token, and its loss.

    The loss is the paper's (arXiv 2602.06036): random anchors in the supervised tokens, each the
    first slot of a block whose other slots are the mask token; slot j predicts the token j after
    its anchor, weighted exp(-(j-1)/gamma); here against the target's own distribution on the
    draft vocab, as EAGLE-3's loss is.
    """

    block_size: int = Field(
        4,
        ge=2,
        le=64,
        description="Slots per block: the anchor and block_size - 1 masks; vLLM serves it with num_speculative_tokens = block_size - 1.",
    )
    num_hidden_layers: int = Field(1, ge=1, le=8, description="Decoder layers of the drafter (Qwen3 blocks).")
    mask_token_id: int | None = Field(
        None,
        ge=0,
        description="The token id filling the masked slots: one the target never writes (a pad or reserved token); its row of the target's embedding is the mask embedding. Required for dflash.",
    )
    anchors_per_row: int = Field(
        256,
        ge=1,
        description="Blocks trained per micro-batch row, drawn among the positions whose next token is supervised.",
    )
    loss_decay_gamma: float = Field(
        7.0, gt=0, description="Slot j's loss weight is exp(-(j-1)/gamma) (the paper's 7 at block 16)."
    )


class DSparkTrainConfig(StrictModel):
    """A DSpark drafter (train.kind: dspark): DFlash's block backbone plus a Markov head, and its loss.

    The loss is the paper's (arXiv 2607.05147, section 3.3) without its confidence term: random
    anchors as DFlash's; the block is the anchor and block_size - 1 noise tokens, slot i predicts
    the token i + 1 after the anchor from its base logits plus the Markov bias of the true token
    before it (teacher forcing); per step ce_weight x cross-entropy against the target's top token
    + tv_weight x total-variation distance to the target's distribution on the draft vocab,
    weighted exp(-(j-1)/gamma).
    """

    block_size: int = Field(
        3,
        ge=1,
        le=64,
        description="Slots per block: the anchor and block_size - 1 noise tokens, every slot predicting; vLLM serves it with num_speculative_tokens = block_size (it rejects 0).",
    )
    num_hidden_layers: int = Field(1, ge=1, le=8, description="Decoder layers of the drafter (Qwen3 blocks).")
    noise_token_id: int | None = Field(
        None,
        ge=0,
        description="The token id filling the block after the anchor (vLLM's dspark_noise_token_id): one the target never writes (a pad or reserved token). Required for dspark.",
    )
    markov_rank: int = Field(
        64,
        ge=1,
        description="Rank r of the Markov head's bigram bias (V x r, r x V_d); at most the draft vocab size.",
    )
    anchors_per_row: int = Field(
        256,
        ge=1,
        description="Blocks trained per micro-batch row, drawn among the positions whose next token is supervised.",
    )
    loss_decay_gamma: float = Field(7.0, gt=0, description="Step j's loss weight is exp(-(j-1)/gamma).")
    ce_weight: float = Field(
        0.1, ge=0, description="Weight of the cross-entropy against the target's top token (the paper's 0.1)."
    )
    tv_weight: float = Field(
        0.9, ge=0, description="Weight of the total-variation distance to the target's distribution (the paper's 0.9)."
    )


class TrainConfig(StageConfig):
    """Train a drafter of the chosen kind (EAGLE-3, DFlash or DSpark: `kind`) with DeepSpeed."""

    # what decides the trained weights is everything else: a rerun that changes only these (cadences, the port,
    # where and how fast online-vllm's engine runs: its engine kind is the source's part of the key; where the run
    # is reported; the unroll attention's kernel, which computes the same attention) resumes from its checkpoints
    speed_only: ClassVar[frozenset[str]] = frozenset(
        {
            "log_every",
            "eval_every",
            "checkpoint_every",
            "keep_checkpoints",
            "master_port",
            "online_vllm",
            "ttt_attention",
            "report_to",
            "tracking",
        }
    )
    run_filled: ClassVar[tuple[str, ...]] = ("tracking.recipe_hash",)  # in_run fills it

    mode: Literal["offline", "online", "online-vllm", "auto"] = Field(
        "offline",
        description="offline reads hidden/; online runs the frozen target inside the trainer (transformers); online-vllm streams each micro-batch's states from an extraction engine through a bounded spool (train.online_vllm); auto = offline when hidden/ is complete or would fit on disk, else online-vllm (the pipeline then skips extract).",
    )
    online_vllm: OnlineVllmConfig = Field(
        default_factory=OnlineVllmConfig, description="Engine and spool of mode online-vllm."
    )
    drafter: DrafterShape = Field(
        default_factory=DrafterShape,
        description="Drafter heads, KV heads, head_dim and MLP width; unset fields copy the target.",
    )
    variant: DrafterVariant = Field(
        default_factory=DrafterVariant,
        description="Drafter architecture (EAGLE-3, EAGLE-3.1, norm_before_fc, layers), recorded in the export.",
    )
    kind: KindName = Field(
        "eagle3",
        description="The drafter kind (eagle3_core/drafter/kinds.py): eagle3 (EAGLE-3 and its variants), dflash (a block drafter, train.dflash) or dspark (a block drafter with a Markov head, train.dspark).",
    )
    dflash: DFlashTrainConfig = Field(
        default_factory=DFlashTrainConfig, description="Block, depth, mask token and loss of train.kind dflash."
    )
    dspark: DSparkTrainConfig = Field(
        default_factory=DSparkTrainConfig,
        description="Block, depth, noise token, Markov rank and loss of train.kind dspark.",
    )
    ttt_steps: int = Field(7, ge=1, description="Training-time-test unroll length K.")
    recompute_ttt_steps: bool = Field(
        False,
        description="Recompute each unroll step's activations in backward (about 1.3x the compute): what the unroll keeps per token drops from 2.10 MB to 0.24 MB at Llama-8B shape, which 32K-token micro-batches need on an 80 GB GPU (benchmarks/train.md, TTT memory).",
    )
    ttt_attention: Literal["blocked", "flex"] = Field(
        "blocked",
        description="EAGLE-3's unroll attention: blocked (exact, any device) or flex (the same masks through compiled flex_attention; GPU only). On an H200 at 8B width flex trained 3x faster at 2K tokens, 4.9x at 8K and 8.6x at 16K with a little less memory (benchmarks/train.md, Long context on one GPU); its loss has not yet been compared with blocked's on a GPU, so blocked stays the default.",
    )
    ttt_decay: float = Field(0.8, gt=0, le=1, description="Loss weight decay per unroll step.")
    epochs: float = Field(1.0, gt=0, description="Passes over the data.")
    max_steps: int | None = Field(None, ge=1, description="Stop after this many optimizer steps (overrides epochs).")
    micro_batch_tokens: int = Field(
        16384,
        ge=1,
        description="Tokens per micro-batch; a longer sample is cut to it (16K trains whole reasoning traces: benchmarks/train.md, TTT memory).",
    )
    grad_accum: int = Field(
        1,
        ge=1,
        description="Micro-batches per rank per optimizer step: the global batch is world size x grad_accum micro-batches (1 rank with 2 equals 2 ranks with 1).",
    )
    packing: bool = Field(
        True,
        description="Pack several samples into one micro-batch row, attention blocked at sample boundaries (no padding); false = one padded row per sample.",
    )
    lr: float = Field(1e-4, gt=0, description="Peak learning rate (AdamW, cosine).")
    warmup_steps: int = Field(50, ge=0, description="Linear warmup steps.")
    grad_clip: float = Field(0.5, gt=0, description="Gradient clipping norm.")
    zero_stage: int = Field(2, ge=0, le=3, description="DeepSpeed ZeRO stage.")
    deepspeed_config: str | None = Field(
        None, description="A DeepSpeed JSON config file that replaces the generated one."
    )
    checkpoint_every: int = Field(200, ge=1, description="Save a DeepSpeed checkpoint every N steps (and at the end).")
    num_gpus: int | None = Field(None, ge=1, description="GPUs for the deepspeed launcher; None = one process.")
    hostfile: str | None = Field(None, description="DeepSpeed hostfile for multi-node runs.")
    seed: int = Field(0, description="Data order and init seed.")
    heldout_fraction: float = Field(
        0.05,
        ge=0,
        lt=1,
        description="Share of samples (by sample id hash) held out to measure the simulated acceptance length; at least one sample when the set has two or more.",
    )
    eval_every: int | None = Field(
        None,
        ge=1,
        description="Measure the held-out set every N steps (it is always measured before the first step and after the last).",
    )
    log_every: int = Field(1, ge=1, description="Write a metrics line every N steps.")
    keep_checkpoints: int = Field(
        2, ge=1, description="Newest DeepSpeed checkpoints kept; older ones are deleted after a save succeeds."
    )
    precision: Literal["auto", "bf16", "fp32"] = Field(
        "auto", description="auto = bf16 (fp32 master weights) on GPU, fp32 on CPU."
    )
    init_from: str | None = Field(
        None,
        description="Start from an earlier drafter's weights: its drafter/, checkpoints/ or export/ directory (same target and draft vocab size; a token both draft vocabs hold keeps its lm_head row).",
    )
    export_embedding: bool | None = Field(
        None,
        description="Ship the target's embedding (bf16) in export/model.safetensors; None = only when serve_pipeline_parallel_size > 1.",
    )
    serve_pipeline_parallel_size: int = Field(
        1,
        ge=1,
        description="Pipeline-parallel size the drafter will be served with: vLLM shares the target's embedding with the drafter only at 1, so above 1 the export carries its own.",
    )
    master_port: int | None = Field(
        None, ge=1024, le=65535, description="torch.distributed port of a one-process run; None = a free port."
    )
    report_to: list[TrackingBackend] = Field(
        default_factory=lambda: ["tensorboard"],
        description="Experiment trackers rank 0 logs to: tensorboard (event files under drafter/tensorboard/), wandb, mlflow (`pip install 'eagle3[tracking]'`); [] = none. A backend that fails is one warning line and training goes on.",
    )
    tracking: TrackingConfig = Field(
        default_factory=TrackingConfig, description="Project, run name and stores of the report_to backends."
    )

    @property
    def ships_embedding(self) -> bool:
        return self.export_embedding if self.export_embedding is not None else self.serve_pipeline_parallel_size > 1

    def state_dtype(self, on_gpu: bool) -> str:
        """The dtype the trainer computes (and, in ``online`` mode, loads the target) in: bf16 on a GPU
        unless ``precision: fp32``; fp32 on a CPU unless ``precision: bf16`` (CPU bf16 matmuls are slow
        and inexact)."""
        if on_gpu:
            return "float32" if self.precision == "fp32" else "bfloat16"
        return "bfloat16" if self.precision == "bf16" else "float32"

    def in_run(self, run: Any) -> "TrainConfig":
        """The recipe's hash in ``tracking`` (the tracking run and the model card report it)."""
        found = run.recipe_hash()
        if self.tracking.recipe_hash == found:
            return self
        return self.model_copy(update={"tracking": self.tracking.model_copy(update={"recipe_hash": found})})

    def unkeyed(self) -> set[str]:
        """What the key leaves out, beside ``speed_only``: the other kinds' sections (a kind's key never moves
        with another kind's section). A DeepSpeed config or hostfile is keyed by its bytes (an input)."""
        return set(self.speed_only) | (set(KINDS) - {"eagle3", self.kind})

    @model_validator(mode="after")
    def _kind_needs(self) -> "TrainConfig":
        if self.kind == "dflash" and self.dflash.mask_token_id is None:
            raise ValueError(
                "train.dflash.mask_token_id: a DFlash drafter fills its block with a mask token; set it in the "
                "recipe to a token id the target never writes (a pad or reserved token; the toy's [PAD] is 1)"
            )
        if self.kind == "dspark" and self.dspark.noise_token_id is None:
            raise ValueError(
                "train.dspark.noise_token_id: a DSpark drafter fills its block after the anchor with a noise token; set "
                "it in the recipe to a token id the target never writes (a pad or reserved token; the toy's [PAD] is 1)"
            )
        if self.kind != "eagle3" and self.ttt_attention != "blocked":
            raise ValueError(
                f"train.ttt_attention: {self.ttt_attention} is EAGLE-3's unroll attention; {self.kind} has its own"
            )
        if self.kind != "eagle3" and self.init_from:
            raise ValueError(f"train.init_from: only eagle3 drafters start from an earlier one, not {self.kind}")
        return self

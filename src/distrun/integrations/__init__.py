"""Ready-made pieces for the frameworks people train with; none of them is a dependency.

Each submodule imports its framework when it is itself imported, never before:

- ``distrun.integrations.huggingface``: ``DistrunCallback`` (a ``transformers.TrainerCallback``)
- ``distrun.integrations.lightning``: ``DistrunCallback`` (a ``lightning.pytorch.Callback``)
- ``distrun.integrations.mmengine``: ``setup()`` (the one step that makes MMEngine start on
  CPU, CUDA and the non-CUDA vendors) and ``DistrunHook`` (a ``mmengine.hooks.Hook``)

Every callback feeds ``ctx.step(step, loss=...)``: the launcher's heartbeat and progress.
"""

"""JAX under `distrun launch`: one JAX process per rank, data parallel by hand.

    distrun launch --nproc-per-node 2 examples/jax_example.py

distrun.init(framework="jax") calls jax.distributed.initialize with the launcher's facts
(coordinator on MASTER_PORT + 1 under torchrun); each process computes the gradient on its
shard, the gradients are averaged across processes, every process applies the same update.
Several processes on one accelerator: set XLA_PYTHON_CLIENT_PREALLOCATE=false (JAX takes 75 %
of the device memory per process otherwise); on CPU nothing is needed.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

import distrun


def loss_fn(w: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((x @ w - y) ** 2)


def main() -> None:
    ctx = distrun.init(framework="jax")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 8)).astype(np.float32)
    y = x @ rng.standard_normal((8, 1)).astype(np.float32)
    shard = slice(ctx.rank, None, ctx.world_size)
    xs, ys = jax.device_put(x[shard], ctx.device), jax.device_put(y[shard], ctx.device)
    w = jnp.zeros((8, 1))
    grad = jax.jit(jax.value_and_grad(loss_fn))
    losses = []
    for step in range(1, 41):
        loss, g = grad(w, xs, ys)
        both = multihost_utils.process_allgather(jnp.concatenate([g.ravel(), loss[None]]))
        mean = both.reshape(ctx.world_size, -1).mean(axis=0)
        w = w - 0.1 * mean[:-1].reshape(w.shape)
        losses.append(float(mean[-1]))
        ctx.step(step, loss=losses[-1])
    ctx.print(f"jax: {jax.process_count()} processes on {ctx.device_name}: "
              f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    distrun.shutdown()


if __name__ == "__main__":
    main()

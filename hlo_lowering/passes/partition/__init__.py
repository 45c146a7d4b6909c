"""The partitioner (docs/multi-device.md): a global module with Shardy (`sdy`) annotations, as
JAX sends pmap, shard_map and sharded jit, becomes the one local program every core runs, with
explicit collectives. mesh.py and sharding.py read Shardy's meshes and shardings; spmd.py is the
pass; collective_groups.py resolves every collective's replica groups to core ranks."""

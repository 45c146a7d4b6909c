"""The partitioner (docs/multi-device.md): a global module with Shardy (`sdy`) annotations, as
JAX sends pmap, shard_map and sharded jit, becomes the one local program every core runs, with
explicit collectives. mesh.py and sharding.py read Shardy's meshes and shardings; spmd.py is the
pass, propagation.py its backward flow of shardings, local_values.py the values it holds per
core, dot_general.py / local_ops.py / local_window_ops.py / local_indexing.py /
local_control_flow.py the ops' local rules; collective_groups.py resolves every collective's
replica groups to core ranks."""

module @IrToHlo.96 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<10xf32>, %arg1: tensor<10x48xf32>, %arg2: tensor<48xf32>, %arg3: tensor<48xf32>, %arg4: tensor<48x24xf32>, %arg5: tensor<6x24xf32>, %arg6: tensor<48xf32>) -> tensor<6x10xf32> {
    %cst = stablehlo.constant dense<3.000000e+00> : tensor<6x48xf32>
    %cst_0 = stablehlo.constant dense<4.471500e-02> : tensor<6x48xf32>
    %cst_1 = stablehlo.constant dense<0.797884583> : tensor<6x48xf32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<6x48xf32>
    %cst_3 = stablehlo.constant dense<5.000000e-01> : tensor<6x48xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<6xf32>
    %cst_5 = stablehlo.constant dense<1.000000e+00> : tensor<6xf32>
    %cst_6 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.transpose %arg4, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[24,48]{0,1}"} : (tensor<48x24xf32>) -> tensor<24x48xf32>
    %1 = stablehlo.dot_general %arg5, %0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<6x24xf32>, tensor<24x48xf32>) -> tensor<6x48xf32>
    %2 = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<48xf32>) -> tensor<6x48xf32>
    %3 = stablehlo.add %1, %2 : tensor<6x48xf32>
    %4 = stablehlo.reshape %3 : (tensor<6x48xf32>) -> tensor<1x6x48xf32>
    %output, %batch_mean, %batch_var = "stablehlo.batch_norm_training"(%4, %cst_5, %cst_4) <{epsilon = 9.99999974E-6 : f32, feature_index = 1 : i64}> : (tensor<1x6x48xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<1x6x48xf32>, tensor<6xf32>, tensor<6xf32>)
    %5 = stablehlo.broadcast_in_dim %arg6, dims = [1] : (tensor<48xf32>) -> tensor<6x48xf32>
    %6 = stablehlo.reshape %output : (tensor<1x6x48xf32>) -> tensor<6x48xf32>
    %7 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<48xf32>) -> tensor<6x48xf32>
    %8 = stablehlo.multiply %6, %7 : tensor<6x48xf32>
    %9 = stablehlo.add %5, %8 : tensor<6x48xf32>
    %10 = stablehlo.multiply %9, %cst_3 : tensor<6x48xf32>
    %11 = stablehlo.power %9, %cst : tensor<6x48xf32>
    %12 = stablehlo.multiply %11, %cst_0 : tensor<6x48xf32>
    %13 = stablehlo.add %9, %12 : tensor<6x48xf32>
    %14 = stablehlo.multiply %13, %cst_1 : tensor<6x48xf32>
    %15 = stablehlo.tanh %14 : tensor<6x48xf32>
    %16 = stablehlo.add %15, %cst_2 : tensor<6x48xf32>
    %17 = stablehlo.multiply %10, %16 : tensor<6x48xf32>
    %18 = stablehlo.transpose %arg1, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[48,10]{0,1}"} : (tensor<10x48xf32>) -> tensor<48x10xf32>
    %19 = stablehlo.dot_general %17, %18, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<6x48xf32>, tensor<48x10xf32>) -> tensor<6x10xf32>
    %20 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<10xf32>) -> tensor<6x10xf32>
    %21 = stablehlo.add %19, %20 : tensor<6x10xf32>
    %22 = stablehlo.reduce(%21 init: %cst_6) applies stablehlo.maximum across dimensions = [1] : (tensor<6x10xf32>, tensor<f32>) -> tensor<6xf32>
    %23 = stablehlo.broadcast_in_dim %22, dims = [0] : (tensor<6xf32>) -> tensor<6x10xf32>
    %24 = stablehlo.subtract %21, %23 : tensor<6x10xf32>
    %25 = stablehlo.exponential %24 : tensor<6x10xf32>
    %26 = stablehlo.reduce(%25 init: %cst_7) applies stablehlo.add across dimensions = [1] : (tensor<6x10xf32>, tensor<f32>) -> tensor<6xf32>
    %27 = stablehlo.broadcast_in_dim %26, dims = [0] : (tensor<6xf32>) -> tensor<6x10xf32>
    %28 = stablehlo.divide %25, %27 : tensor<6x10xf32>
    return %28 : tensor<6x10xf32>
  }
}

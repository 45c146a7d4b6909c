module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32xf32>, %arg1: tensor<16x32xf32>, %arg2: tensor<4xf32>, %arg3: tensor<32x4xf32>, %arg4: tensor<32xf32>, %arg5: tensor<32xf32>, %arg6: tensor<8x16xf32>, %arg7: tensor<8x4xf32>) -> (tensor<f32> {jax.result_info = "result[0]"}, tensor<32xf32> {jax.result_info = "result[1]['params']['Dense_0']['bias']"}, tensor<16x32xf32> {jax.result_info = "result[1]['params']['Dense_0']['kernel']"}, tensor<4xf32> {jax.result_info = "result[1]['params']['Dense_1']['bias']"}, tensor<32x4xf32> {jax.result_info = "result[1]['params']['Dense_1']['kernel']"}, tensor<32xf32> {jax.result_info = "result[1]['params']['LayerNorm_0']['bias']"}, tensor<32xf32> {jax.result_info = "result[1]['params']['LayerNorm_0']['scale']"}) {
    %0 = stablehlo.dot_general %arg6, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    %1 = stablehlo.reshape %arg0 : (tensor<32xf32>) -> tensor<1x32xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x32xf32>) -> tensor<8x32xf32>
    %3 = stablehlo.add %0, %2 : tensor<8x32xf32>
    %4 = chlo.square %3 : tensor<8x32xf32> -> tensor<8x32xf32>
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
    %6 = stablehlo.multiply %5, %3 : tensor<8x32xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.reduce(%3 init: %cst_0) applies stablehlo.add across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
    %cst_1 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %9 = stablehlo.divide %7, %8 : tensor<8xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %10 = stablehlo.reduce(%4 init: %cst_2) applies stablehlo.add across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
    %cst_3 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %12 = stablehlo.divide %10, %11 : tensor<8xf32>
    %13 = chlo.square %9 : tensor<8xf32> -> tensor<8xf32>
    %cst_4 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %15 = stablehlo.multiply %14, %9 : tensor<8xf32>
    %16 = stablehlo.subtract %12, %13 : tensor<8xf32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %17 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %18 = stablehlo.maximum %17, %16 : tensor<8xf32>
    %19 = stablehlo.compare EQ, %16, %18, FLOAT : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>
    %cst_6 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %22 = stablehlo.select %19, %20, %21 : tensor<8xi1>, tensor<8xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %23 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %24 = stablehlo.compare EQ, %23, %18, FLOAT : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>
    %cst_9 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %cst_10 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %26 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %27 = stablehlo.select %24, %25, %26 : tensor<8xi1>, tensor<8xf32>
    %28 = stablehlo.divide %22, %27 : tensor<8xf32>
    %29 = stablehlo.broadcast_in_dim %9, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %30 = stablehlo.broadcast_in_dim %18, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %31 = stablehlo.broadcast_in_dim %29, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x32xf32>
    %32 = stablehlo.subtract %3, %31 : tensor<8x32xf32>
    %cst_11 = stablehlo.constant dense<9.99999997E-7> : tensor<f32>
    %33 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %34 = stablehlo.add %30, %33 : tensor<8x1xf32>
    %35 = stablehlo.rsqrt %34 : tensor<8x1xf32>
    %36 = stablehlo.divide %35, %34 : tensor<8x1xf32>
    %cst_12 = stablehlo.constant dense<-5.000000e-01> : tensor<f32>
    %37 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %38 = stablehlo.multiply %37, %36 : tensor<8x1xf32>
    %39 = stablehlo.reshape %arg5 : (tensor<32xf32>) -> tensor<1x32xf32>
    %40 = stablehlo.broadcast_in_dim %35, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x32xf32>
    %41 = stablehlo.broadcast_in_dim %39, dims = [0, 1] : (tensor<1x32xf32>) -> tensor<8x32xf32>
    %42 = stablehlo.multiply %40, %41 : tensor<8x32xf32>
    %43 = stablehlo.multiply %32, %42 : tensor<8x32xf32>
    %44 = stablehlo.reshape %arg4 : (tensor<32xf32>) -> tensor<1x32xf32>
    %45 = stablehlo.broadcast_in_dim %44, dims = [0, 1] : (tensor<1x32xf32>) -> tensor<8x32xf32>
    %46 = stablehlo.add %43, %45 : tensor<8x32xf32>
    %47 = stablehlo.multiply %46, %46 : tensor<8x32xf32>
    %48 = stablehlo.multiply %47, %46 : tensor<8x32xf32>
    %49 = stablehlo.multiply %46, %46 : tensor<8x32xf32>
    %cst_13 = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %50 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
    %51 = stablehlo.multiply %50, %49 : tensor<8x32xf32>
    %cst_14 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
    %52 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
    %53 = stablehlo.multiply %52, %48 : tensor<8x32xf32>
    %54 = stablehlo.add %46, %53 : tensor<8x32xf32>
    %cst_15 = stablehlo.constant dense<0.797884583> : tensor<f32>
    %55 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
    %56 = stablehlo.multiply %55, %54 : tensor<8x32xf32>
    %57 = stablehlo.tanh %56 : tensor<8x32xf32>
    %cst_16 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %58 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
    %59 = stablehlo.subtract %58, %57 : tensor<8x32xf32>
    %cst_17 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %60 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
    %61 = stablehlo.add %60, %57 : tensor<8x32xf32>
    %cst_18 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %62 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
    %63 = stablehlo.multiply %62, %61 : tensor<8x32xf32>
    %64 = stablehlo.multiply %46, %63 : tensor<8x32xf32>
    %65 = stablehlo.dot_general %64, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x32xf32>, tensor<32x4xf32>) -> tensor<8x4xf32>
    %66 = stablehlo.reshape %arg2 : (tensor<4xf32>) -> tensor<1x4xf32>
    %67 = stablehlo.broadcast_in_dim %66, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<8x4xf32>
    %68 = stablehlo.add %65, %67 : tensor<8x4xf32>
    %69 = stablehlo.subtract %68, %arg7 : tensor<8x4xf32>
    %70 = stablehlo.multiply %69, %69 : tensor<8x4xf32>
    %cst_19 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %71 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %72 = stablehlo.multiply %71, %69 : tensor<8x4xf32>
    %cst_20 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %73 = stablehlo.reduce(%70 init: %cst_20) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x4xf32>, tensor<f32>) -> tensor<f32>
    %cst_21 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %74 = stablehlo.divide %73, %cst_21 : tensor<f32>
    %cst_22 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_23 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %75 = stablehlo.divide %cst_22, %cst_23 : tensor<f32>
    %76 = stablehlo.broadcast_in_dim %75, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %77 = stablehlo.multiply %76, %72 : tensor<8x4xf32>
    %cst_24 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %78 = stablehlo.reduce(%77 init: %cst_24) applies stablehlo.add across dimensions = [0] : (tensor<8x4xf32>, tensor<f32>) -> tensor<4xf32>
    %79 = stablehlo.reshape %78 : (tensor<4xf32>) -> tensor<1x4xf32>
    %80 = stablehlo.reshape %79 : (tensor<1x4xf32>) -> tensor<4xf32>
    %81 = stablehlo.dot_general %77, %64, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x4xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
    %82 = stablehlo.transpose %81, dims = [1, 0] : (tensor<4x32xf32>) -> tensor<32x4xf32>
    %83 = stablehlo.dot_general %77, %arg3, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x4xf32>, tensor<32x4xf32>) -> tensor<8x32xf32>
    %84 = stablehlo.multiply %46, %83 : tensor<8x32xf32>
    %85 = stablehlo.multiply %83, %63 : tensor<8x32xf32>
    %cst_25 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %86 = stablehlo.broadcast_in_dim %cst_25, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
    %87 = stablehlo.multiply %86, %84 : tensor<8x32xf32>
    %88 = stablehlo.multiply %87, %59 : tensor<8x32xf32>
    %89 = stablehlo.multiply %88, %57 : tensor<8x32xf32>
    %90 = stablehlo.add %88, %89 : tensor<8x32xf32>
    %cst_26 = stablehlo.constant dense<0.797884583> : tensor<f32>
    %91 = stablehlo.broadcast_in_dim %cst_26, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
    %92 = stablehlo.multiply %91, %90 : tensor<8x32xf32>
    %93 = stablehlo.add %85, %92 : tensor<8x32xf32>
    %cst_27 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
    %94 = stablehlo.broadcast_in_dim %cst_27, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
    %95 = stablehlo.multiply %94, %92 : tensor<8x32xf32>
    %96 = stablehlo.multiply %95, %51 : tensor<8x32xf32>
    %97 = stablehlo.add %93, %96 : tensor<8x32xf32>
    %cst_28 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %98 = stablehlo.reduce(%97 init: %cst_28) applies stablehlo.add across dimensions = [0] : (tensor<8x32xf32>, tensor<f32>) -> tensor<32xf32>
    %99 = stablehlo.reshape %98 : (tensor<32xf32>) -> tensor<1x32xf32>
    %100 = stablehlo.reshape %99 : (tensor<1x32xf32>) -> tensor<32xf32>
    %101 = stablehlo.multiply %32, %97 : tensor<8x32xf32>
    %102 = stablehlo.multiply %97, %42 : tensor<8x32xf32>
    %103 = stablehlo.broadcast_in_dim %35, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x32xf32>
    %104 = stablehlo.multiply %103, %101 : tensor<8x32xf32>
    %cst_29 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %105 = stablehlo.reduce(%104 init: %cst_29) applies stablehlo.add across dimensions = [0] : (tensor<8x32xf32>, tensor<f32>) -> tensor<32xf32>
    %106 = stablehlo.reshape %105 : (tensor<32xf32>) -> tensor<1x32xf32>
    %107 = stablehlo.broadcast_in_dim %39, dims = [0, 1] : (tensor<1x32xf32>) -> tensor<8x32xf32>
    %108 = stablehlo.multiply %101, %107 : tensor<8x32xf32>
    %cst_30 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %109 = stablehlo.reduce(%108 init: %cst_30) applies stablehlo.add across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
    %110 = stablehlo.reshape %109 : (tensor<8xf32>) -> tensor<8x1xf32>
    %111 = stablehlo.reshape %106 : (tensor<1x32xf32>) -> tensor<32xf32>
    %112 = stablehlo.multiply %110, %38 : tensor<8x1xf32>
    %113 = stablehlo.negate %102 : tensor<8x32xf32>
    %cst_31 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %114 = stablehlo.reduce(%113 init: %cst_31) applies stablehlo.add across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
    %115 = stablehlo.reshape %114 : (tensor<8xf32>) -> tensor<8x1xf32>
    %cst_32 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %116 = stablehlo.reduce(%112 init: %cst_32) applies stablehlo.add across dimensions = [1] : (tensor<8x1xf32>, tensor<f32>) -> tensor<8xf32>
    %cst_33 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %117 = stablehlo.reduce(%115 init: %cst_33) applies stablehlo.add across dimensions = [1] : (tensor<8x1xf32>, tensor<f32>) -> tensor<8xf32>
    %118 = stablehlo.multiply %116, %28 : tensor<8xf32>
    %119 = stablehlo.negate %118 : tensor<8xf32>
    %120 = stablehlo.multiply %119, %15 : tensor<8xf32>
    %121 = stablehlo.add %117, %120 : tensor<8xf32>
    %cst_34 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %122 = stablehlo.broadcast_in_dim %cst_34, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %123 = stablehlo.divide %118, %122 : tensor<8xf32>
    %124 = stablehlo.broadcast_in_dim %123, dims = [0] : (tensor<8xf32>) -> tensor<8x32xf32>
    %cst_35 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
    %125 = stablehlo.broadcast_in_dim %cst_35, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %126 = stablehlo.divide %121, %125 : tensor<8xf32>
    %127 = stablehlo.broadcast_in_dim %126, dims = [0] : (tensor<8xf32>) -> tensor<8x32xf32>
    %128 = stablehlo.add %102, %127 : tensor<8x32xf32>
    %129 = stablehlo.multiply %124, %6 : tensor<8x32xf32>
    %130 = stablehlo.add %128, %129 : tensor<8x32xf32>
    %cst_36 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %131 = stablehlo.reduce(%130 init: %cst_36) applies stablehlo.add across dimensions = [0] : (tensor<8x32xf32>, tensor<f32>) -> tensor<32xf32>
    %132 = stablehlo.reshape %131 : (tensor<32xf32>) -> tensor<1x32xf32>
    %133 = stablehlo.reshape %132 : (tensor<1x32xf32>) -> tensor<32xf32>
    %134 = stablehlo.dot_general %130, %arg6, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x32xf32>, tensor<8x16xf32>) -> tensor<32x16xf32>
    %135 = stablehlo.transpose %134, dims = [1, 0] : (tensor<32x16xf32>) -> tensor<16x32xf32>
    %cst_37 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %136 = stablehlo.broadcast_in_dim %cst_37, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %cst_38 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %137 = stablehlo.broadcast_in_dim %cst_38, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %cst_39 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %138 = stablehlo.broadcast_in_dim %cst_39, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %cst_40 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %139 = stablehlo.broadcast_in_dim %cst_40, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %cst_41 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %140 = stablehlo.broadcast_in_dim %cst_41, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %cst_42 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %141 = stablehlo.broadcast_in_dim %cst_42, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %cst_43 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %142 = stablehlo.broadcast_in_dim %cst_43, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %cst_44 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %143 = stablehlo.broadcast_in_dim %cst_44, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %cst_45 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %144 = stablehlo.broadcast_in_dim %cst_45, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %cst_46 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %145 = stablehlo.broadcast_in_dim %cst_46, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %cst_47 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %146 = stablehlo.broadcast_in_dim %cst_47, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %cst_48 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %147 = stablehlo.broadcast_in_dim %cst_48, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %cst_49 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %148 = stablehlo.broadcast_in_dim %cst_49, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %149 = stablehlo.multiply %148, %133 : tensor<32xf32>
    %cst_50 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %150 = stablehlo.broadcast_in_dim %cst_50, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %151 = stablehlo.multiply %150, %136 : tensor<32xf32>
    %152 = stablehlo.add %149, %151 : tensor<32xf32>
    %cst_51 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %153 = stablehlo.broadcast_in_dim %cst_51, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %154 = stablehlo.multiply %153, %135 : tensor<16x32xf32>
    %cst_52 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %155 = stablehlo.broadcast_in_dim %cst_52, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %156 = stablehlo.multiply %155, %137 : tensor<16x32xf32>
    %157 = stablehlo.add %154, %156 : tensor<16x32xf32>
    %cst_53 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %158 = stablehlo.broadcast_in_dim %cst_53, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %159 = stablehlo.multiply %158, %80 : tensor<4xf32>
    %cst_54 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %160 = stablehlo.broadcast_in_dim %cst_54, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %161 = stablehlo.multiply %160, %138 : tensor<4xf32>
    %162 = stablehlo.add %159, %161 : tensor<4xf32>
    %cst_55 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %163 = stablehlo.broadcast_in_dim %cst_55, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %164 = stablehlo.multiply %163, %82 : tensor<32x4xf32>
    %cst_56 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %165 = stablehlo.broadcast_in_dim %cst_56, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %166 = stablehlo.multiply %165, %139 : tensor<32x4xf32>
    %167 = stablehlo.add %164, %166 : tensor<32x4xf32>
    %cst_57 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %168 = stablehlo.broadcast_in_dim %cst_57, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %169 = stablehlo.multiply %168, %100 : tensor<32xf32>
    %cst_58 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %170 = stablehlo.broadcast_in_dim %cst_58, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %171 = stablehlo.multiply %170, %140 : tensor<32xf32>
    %172 = stablehlo.add %169, %171 : tensor<32xf32>
    %cst_59 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %173 = stablehlo.broadcast_in_dim %cst_59, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %174 = stablehlo.multiply %173, %111 : tensor<32xf32>
    %cst_60 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %175 = stablehlo.broadcast_in_dim %cst_60, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %176 = stablehlo.multiply %175, %141 : tensor<32xf32>
    %177 = stablehlo.add %174, %176 : tensor<32xf32>
    %178 = stablehlo.multiply %133, %133 : tensor<32xf32>
    %cst_61 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %179 = stablehlo.broadcast_in_dim %cst_61, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %180 = stablehlo.multiply %179, %178 : tensor<32xf32>
    %cst_62 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %181 = stablehlo.broadcast_in_dim %cst_62, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %182 = stablehlo.multiply %181, %142 : tensor<32xf32>
    %183 = stablehlo.add %180, %182 : tensor<32xf32>
    %184 = stablehlo.multiply %135, %135 : tensor<16x32xf32>
    %cst_63 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %185 = stablehlo.broadcast_in_dim %cst_63, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %186 = stablehlo.multiply %185, %184 : tensor<16x32xf32>
    %cst_64 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %187 = stablehlo.broadcast_in_dim %cst_64, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %188 = stablehlo.multiply %187, %143 : tensor<16x32xf32>
    %189 = stablehlo.add %186, %188 : tensor<16x32xf32>
    %190 = stablehlo.multiply %80, %80 : tensor<4xf32>
    %cst_65 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %191 = stablehlo.broadcast_in_dim %cst_65, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %192 = stablehlo.multiply %191, %190 : tensor<4xf32>
    %cst_66 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %193 = stablehlo.broadcast_in_dim %cst_66, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %194 = stablehlo.multiply %193, %144 : tensor<4xf32>
    %195 = stablehlo.add %192, %194 : tensor<4xf32>
    %196 = stablehlo.multiply %82, %82 : tensor<32x4xf32>
    %cst_67 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %197 = stablehlo.broadcast_in_dim %cst_67, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %198 = stablehlo.multiply %197, %196 : tensor<32x4xf32>
    %cst_68 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %199 = stablehlo.broadcast_in_dim %cst_68, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %200 = stablehlo.multiply %199, %145 : tensor<32x4xf32>
    %201 = stablehlo.add %198, %200 : tensor<32x4xf32>
    %202 = stablehlo.multiply %100, %100 : tensor<32xf32>
    %cst_69 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %203 = stablehlo.broadcast_in_dim %cst_69, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %204 = stablehlo.multiply %203, %202 : tensor<32xf32>
    %cst_70 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %205 = stablehlo.broadcast_in_dim %cst_70, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %206 = stablehlo.multiply %205, %146 : tensor<32xf32>
    %207 = stablehlo.add %204, %206 : tensor<32xf32>
    %208 = stablehlo.multiply %111, %111 : tensor<32xf32>
    %cst_71 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %209 = stablehlo.broadcast_in_dim %cst_71, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %210 = stablehlo.multiply %209, %208 : tensor<32xf32>
    %cst_72 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %211 = stablehlo.broadcast_in_dim %cst_72, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %212 = stablehlo.multiply %211, %147 : tensor<32xf32>
    %213 = stablehlo.add %210, %212 : tensor<32xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_73 = stablehlo.constant dense<2147483647> : tensor<i32>
    %214 = stablehlo.compare LT, %c, %c_73, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_74 = stablehlo.constant dense<0> : tensor<i32>
    %c_75 = stablehlo.constant dense<1> : tensor<i32>
    %215 = stablehlo.add %c_74, %c_75 : tensor<i32>
    %c_76 = stablehlo.constant dense<2147483647> : tensor<i32>
    %216 = call @_where(%214, %215, %c_76) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %cst_77 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %217 = stablehlo.convert %216 : (tensor<i32>) -> tensor<f32>
    %218 = stablehlo.power %cst_77, %217 : tensor<f32>
    %cst_78 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %219 = stablehlo.subtract %cst_78, %218 : tensor<f32>
    %220 = stablehlo.broadcast_in_dim %219, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %221 = stablehlo.divide %152, %220 : tensor<32xf32>
    %222 = stablehlo.broadcast_in_dim %219, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %223 = stablehlo.divide %157, %222 : tensor<16x32xf32>
    %224 = stablehlo.broadcast_in_dim %219, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %225 = stablehlo.divide %162, %224 : tensor<4xf32>
    %226 = stablehlo.broadcast_in_dim %219, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %227 = stablehlo.divide %167, %226 : tensor<32x4xf32>
    %228 = stablehlo.broadcast_in_dim %219, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %229 = stablehlo.divide %172, %228 : tensor<32xf32>
    %230 = stablehlo.broadcast_in_dim %219, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %231 = stablehlo.divide %177, %230 : tensor<32xf32>
    %cst_79 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %232 = stablehlo.convert %216 : (tensor<i32>) -> tensor<f32>
    %233 = stablehlo.power %cst_79, %232 : tensor<f32>
    %cst_80 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %234 = stablehlo.subtract %cst_80, %233 : tensor<f32>
    %235 = stablehlo.broadcast_in_dim %234, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %236 = stablehlo.divide %183, %235 : tensor<32xf32>
    %237 = stablehlo.broadcast_in_dim %234, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %238 = stablehlo.divide %189, %237 : tensor<16x32xf32>
    %239 = stablehlo.broadcast_in_dim %234, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %240 = stablehlo.divide %195, %239 : tensor<4xf32>
    %241 = stablehlo.broadcast_in_dim %234, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %242 = stablehlo.divide %201, %241 : tensor<32x4xf32>
    %243 = stablehlo.broadcast_in_dim %234, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %244 = stablehlo.divide %207, %243 : tensor<32xf32>
    %245 = stablehlo.broadcast_in_dim %234, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %246 = stablehlo.divide %213, %245 : tensor<32xf32>
    %cst_81 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %247 = stablehlo.broadcast_in_dim %cst_81, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %248 = stablehlo.add %236, %247 : tensor<32xf32>
    %249 = stablehlo.sqrt %248 : tensor<32xf32>
    %cst_82 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %250 = stablehlo.broadcast_in_dim %cst_82, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %251 = stablehlo.add %249, %250 : tensor<32xf32>
    %252 = stablehlo.divide %221, %251 : tensor<32xf32>
    %cst_83 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %253 = stablehlo.broadcast_in_dim %cst_83, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %254 = stablehlo.add %238, %253 : tensor<16x32xf32>
    %255 = stablehlo.sqrt %254 : tensor<16x32xf32>
    %cst_84 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %256 = stablehlo.broadcast_in_dim %cst_84, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %257 = stablehlo.add %255, %256 : tensor<16x32xf32>
    %258 = stablehlo.divide %223, %257 : tensor<16x32xf32>
    %cst_85 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %259 = stablehlo.broadcast_in_dim %cst_85, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %260 = stablehlo.add %240, %259 : tensor<4xf32>
    %261 = stablehlo.sqrt %260 : tensor<4xf32>
    %cst_86 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %262 = stablehlo.broadcast_in_dim %cst_86, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %263 = stablehlo.add %261, %262 : tensor<4xf32>
    %264 = stablehlo.divide %225, %263 : tensor<4xf32>
    %cst_87 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %265 = stablehlo.broadcast_in_dim %cst_87, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %266 = stablehlo.add %242, %265 : tensor<32x4xf32>
    %267 = stablehlo.sqrt %266 : tensor<32x4xf32>
    %cst_88 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %268 = stablehlo.broadcast_in_dim %cst_88, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %269 = stablehlo.add %267, %268 : tensor<32x4xf32>
    %270 = stablehlo.divide %227, %269 : tensor<32x4xf32>
    %cst_89 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %271 = stablehlo.broadcast_in_dim %cst_89, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %272 = stablehlo.add %244, %271 : tensor<32xf32>
    %273 = stablehlo.sqrt %272 : tensor<32xf32>
    %cst_90 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %274 = stablehlo.broadcast_in_dim %cst_90, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %275 = stablehlo.add %273, %274 : tensor<32xf32>
    %276 = stablehlo.divide %229, %275 : tensor<32xf32>
    %cst_91 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %277 = stablehlo.broadcast_in_dim %cst_91, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %278 = stablehlo.add %246, %277 : tensor<32xf32>
    %279 = stablehlo.sqrt %278 : tensor<32xf32>
    %cst_92 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %280 = stablehlo.broadcast_in_dim %cst_92, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %281 = stablehlo.add %279, %280 : tensor<32xf32>
    %282 = stablehlo.divide %231, %281 : tensor<32xf32>
    %cst_93 = stablehlo.constant dense<9.99999974E-5> : tensor<f32>
    %283 = stablehlo.broadcast_in_dim %cst_93, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %284 = stablehlo.multiply %283, %arg0 : tensor<32xf32>
    %285 = stablehlo.add %252, %284 : tensor<32xf32>
    %cst_94 = stablehlo.constant dense<9.99999974E-5> : tensor<f32>
    %286 = stablehlo.broadcast_in_dim %cst_94, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %287 = stablehlo.multiply %286, %arg1 : tensor<16x32xf32>
    %288 = stablehlo.add %258, %287 : tensor<16x32xf32>
    %cst_95 = stablehlo.constant dense<9.99999974E-5> : tensor<f32>
    %289 = stablehlo.broadcast_in_dim %cst_95, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %290 = stablehlo.multiply %289, %arg2 : tensor<4xf32>
    %291 = stablehlo.add %264, %290 : tensor<4xf32>
    %cst_96 = stablehlo.constant dense<9.99999974E-5> : tensor<f32>
    %292 = stablehlo.broadcast_in_dim %cst_96, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %293 = stablehlo.multiply %292, %arg3 : tensor<32x4xf32>
    %294 = stablehlo.add %270, %293 : tensor<32x4xf32>
    %cst_97 = stablehlo.constant dense<9.99999974E-5> : tensor<f32>
    %295 = stablehlo.broadcast_in_dim %cst_97, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %296 = stablehlo.multiply %295, %arg4 : tensor<32xf32>
    %297 = stablehlo.add %276, %296 : tensor<32xf32>
    %cst_98 = stablehlo.constant dense<9.99999974E-5> : tensor<f32>
    %298 = stablehlo.broadcast_in_dim %cst_98, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %299 = stablehlo.multiply %298, %arg5 : tensor<32xf32>
    %300 = stablehlo.add %282, %299 : tensor<32xf32>
    %cst_99 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %301 = stablehlo.broadcast_in_dim %cst_99, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %302 = stablehlo.multiply %301, %285 : tensor<32xf32>
    %cst_100 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %303 = stablehlo.broadcast_in_dim %cst_100, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %304 = stablehlo.multiply %303, %288 : tensor<16x32xf32>
    %cst_101 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %305 = stablehlo.broadcast_in_dim %cst_101, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %306 = stablehlo.multiply %305, %291 : tensor<4xf32>
    %cst_102 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %307 = stablehlo.broadcast_in_dim %cst_102, dims = [] : (tensor<f32>) -> tensor<32x4xf32>
    %308 = stablehlo.multiply %307, %294 : tensor<32x4xf32>
    %cst_103 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %309 = stablehlo.broadcast_in_dim %cst_103, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %310 = stablehlo.multiply %309, %297 : tensor<32xf32>
    %cst_104 = stablehlo.constant dense<-1.000000e-03> : tensor<f32>
    %311 = stablehlo.broadcast_in_dim %cst_104, dims = [] : (tensor<f32>) -> tensor<32xf32>
    %312 = stablehlo.multiply %311, %300 : tensor<32xf32>
    %313 = stablehlo.add %arg0, %302 : tensor<32xf32>
    %314 = stablehlo.add %arg1, %304 : tensor<16x32xf32>
    %315 = stablehlo.add %arg2, %306 : tensor<4xf32>
    %316 = stablehlo.add %arg3, %308 : tensor<32x4xf32>
    %317 = stablehlo.add %arg4, %310 : tensor<32xf32>
    %318 = stablehlo.add %arg5, %312 : tensor<32xf32>
    return %74, %313, %314, %315, %316, %317, %318 : tensor<f32>, tensor<32xf32>, tensor<16x32xf32>, tensor<4xf32>, tensor<32x4xf32>, tensor<32xf32>, tensor<32xf32>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<i32>
    return %0 : tensor<i32>
  }
}

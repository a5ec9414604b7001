# `qkv quantize` and `qkv perplexity` end to end: a text the model generates itself, a Q8_0
# conversion of the llama2.c checkpoint with perplexity before/after, then perplexity of the
# written file; bad invocations exit 1 with a message naming the problem.
set(M ${SHARED}/models)
set(D ${CMAKE_CURRENT_BINARY_DIR}/cli-quantize)
file(MAKE_DIRECTORY ${D})
set(text "")
foreach(seed 1 2 3 4)
  execute_process(COMMAND ${QKV} run ${M}/aidreams260K.bin -z ${M}/aidreams-tok512.bin -n 0 -t 1 -s ${seed}
                  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "qkv run failed")
  endif()
  string(APPEND text "${out}")
endforeach()
file(WRITE ${D}/text.txt "${text}")

function(expect_ok regex)
  execute_process(COMMAND ${QKV} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${regex}")
    message(FATAL_ERROR "qkv ${ARGN}: exit ${rc}, stdout:\n${out}\nstderr:\n${err}\n(expected /${regex}/)")
  endif()
  message(STATUS "${out}")
endfunction()
function(expect_error regex)
  execute_process(COMMAND ${QKV} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 1 OR NOT err MATCHES "${regex}")
    message(FATAL_ERROR "qkv ${ARGN}: exit ${rc}, stderr:\n${err}\n(expected exit 1 and /${regex}/)")
  endif()
endfunction()

expect_ok("-> .*q8_0.*smaller.*F16.*Q8_0.*ffn_down.weight: rows of 172 do not split.*perplexity on .* before [0-9.]+, after [0-9.]+ \\([-+]0\\.[0-9]+%\\)"
  quantize ${M}/aidreams260K.bin ${D}/a-q8_0.gguf --type q8_0 -z ${M}/aidreams-tok512.bin --text ${D}/text.txt)
expect_ok("^perplexity: [0-9]\\.[0-9]+ \\([0-9]+ tokens predicted, [0-9]+ tokens in [0-9]+ windows\\)"
  perplexity ${D}/a-q8_0.gguf ${D}/text.txt --ctx 64 --threads 1)
expect_ok("a-q4_k.gguf .*Q8_0.*token_embd.weight: the classifier is kept at Q6_K; rows of 64 do not split into Q6_K blocks of 256, so Q8_0"
  quantize ${D}/a-q8_0.gguf ${D}/a-q4_k.gguf --type q4_k --allow-requantize)
expect_ok("a-q5_k.gguf .*Q5_1.*Q8_0.*blk.0.attn_q.weight: rows of 64 do not split into Q5_K blocks of 256, so Q5_1.*perplexity on .* before [0-9.]+, after [0-9.]+ \\([-+]0\\.[0-9]+%\\)"
  quantize ${D}/a-q8_0.gguf ${D}/a-q5_k.gguf --type q5_k --text ${D}/text.txt --allow-requantize)
expect_error("already quantized .*Q8_0.*--allow-requantize" quantize ${D}/a-q8_0.gguf ${D}/x.gguf --type q4_0)
expect_error("needs --type" quantize ${M}/aidreams260K.bin ${D}/x.gguf)
expect_error("unknown weight type 'q3_k'" quantize ${M}/aidreams260K.bin ${D}/x.gguf --type q3_k)
expect_error("missing text FILE" perplexity ${D}/a-q8_0.gguf)
file(WRITE ${D}/empty.txt "")
expect_error("text file .* is empty" perplexity ${D}/a-q8_0.gguf ${D}/empty.txt)
expect_error("cannot open" perplexity ${D}/a-q8_0.gguf ${D}/missing.txt)
expect_error("--ctx must be" perplexity ${D}/a-q8_0.gguf ${D}/text.txt --ctx 0)
expect_error("bad_model.*(llama2.c|model header)" quantize ${D}/text.txt ${D}/x.gguf --type q8_0 -z ${M}/aidreams-tok512.bin)

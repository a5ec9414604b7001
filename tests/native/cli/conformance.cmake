# Golden conformance: `qkv run` must print exactly the bytes llama2.c's run.c printed for the
# reference cases in ../shared/reference (file names encode the command; see models/README).
set(M ${SHARED}/models)
set(R ${SHARED}/reference)
function(check name)
  execute_process(COMMAND ${QKV} run ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  file(READ ${R}/${name} want)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: qkv exited ${rc}: ${err}")
  endif()
  if(NOT out STREQUAL want)
    message(FATAL_ERROR "${name}: output differs\n--- want\n${want}\n--- got\n${out}")
  endif()
  message(STATUS "${name}: identical")
endfunction()
check(aidreams260K.greedy.i-dream-of.n60.txt ${M}/aidreams260K.bin -z ${M}/aidreams-tok512.bin -t 0 -n 60 -i "I dream of")
check(aidreams260K.t1-p0.9-s42.i-dream-of.n60.txt ${M}/aidreams260K.bin -z ${M}/aidreams-tok512.bin -t 1.0 -p 0.9 -s 42 -n 60 -i "I dream of")
check(stories260K.greedy.aidreams-tok512.n64.txt ${M}/stories260K.bin -z ${M}/aidreams-tok512.bin -t 0 -n 64)

# The same references through GGUF: each model converted by `qkv convert` (f32, tokenizer
# embedded), run without -z.
set(G ${CMAKE_CURRENT_BINARY_DIR}/conformance-gguf)
file(MAKE_DIRECTORY ${G})
foreach(m aidreams260K stories260K)
  execute_process(COMMAND ${QKV} convert ${M}/${m}.bin -z ${M}/aidreams-tok512.bin -o ${G}/${m}.gguf
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "qkv convert ${m}: ${err}")
  endif()
endforeach()
check(aidreams260K.greedy.i-dream-of.n60.txt ${G}/aidreams260K.gguf -t 0 -n 60 -i "I dream of")
check(aidreams260K.t1-p0.9-s42.i-dream-of.n60.txt ${G}/aidreams260K.gguf -t 1.0 -p 0.9 -s 42 -n 60 -i "I dream of")
check(stories260K.greedy.aidreams-tok512.n64.txt ${G}/stories260K.gguf -t 0 -n 64)

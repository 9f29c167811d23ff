<#
.SYNOPSIS
  Build SpecDeck for Windows: llama-cpp-python (CPU or CUDA), the PyInstaller bundle and
  SpecDeck-Setup.exe (Inno Setup 6).

.EXAMPLE
  powershell -ExecutionPolicy Bypass -File packaging\windows\build.ps1
  powershell -ExecutionPolicy Bypass -File packaging\windows\build.ps1 -Variant cuda

.NOTES
  Needs: Python 3.10-3.12 (x64), Visual Studio 2022 Build Tools with "Desktop development with
  C++" (llama.cpp is compiled from source), CMake (comes with the Build Tools), Inno Setup 6
  (ISCC.exe) and for -Variant cuda the CUDA Toolkit 12.x (CUDA_PATH set by its installer).
  Output: dist\SpecDeck\ (the program folder) and dist\SpecDeck-Setup[-cuda].exe.
#>
[CmdletBinding()]
param(
    [ValidateSet("cpu", "cuda")] [string] $Variant = "cpu",
    [string] $Python = "python",
    # Use the llama-cpp-python already installed in the build venv (CI builds it in a cached step).
    [switch] $SkipLlamaBuild,
    # Build the bundle only, not the installer.
    [switch] $NoInstaller,
    # Semicolon list of CUDA architectures for -Variant cuda.
    [string] $CudaArchitectures = "75;80;86;89;90"
)
$ErrorActionPreference = "Stop"
Set-StrictMode -Version Latest

$Root = (Resolve-Path (Join-Path $PSScriptRoot "..\..")).Path
Set-Location $Root
$Venv = Join-Path $Root ".venv-build-$Variant"
$Py = Join-Path $Venv "Scripts\python.exe"
$LlamaVersion = "0.3.36"

function Step($msg) { Write-Host "[build] $msg" -ForegroundColor Cyan }
# Run a native program and stop on failure. A simple (non-advanced) function on purpose:
# "-m", "--quiet", "/Q" ... must reach the program untouched through $args.
function Invoke-Checked {
    $exe, $rest = $args
    & $exe @rest
    if ($LASTEXITCODE -ne 0) { throw "$exe $($rest -join ' ') failed with exit code $LASTEXITCODE" }
}

# --- virtual environment -----------------------------------------------------------------
if (-not (Test-Path $Py)) {
    Step "creating $Venv"
    Invoke-Checked $Python -m venv $Venv
}
Invoke-Checked $Py -m pip install --quiet --upgrade pip

# --- llama-cpp-python from source with the right backend ---------------------------------
# GGML_NATIVE=OFF: the build machine's CPU must not decide which instructions users need.
# AVX2/FMA/F16C (any x86-64 CPU since 2013-2015) is the baseline for speed.
$cpuArgs = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
if ($Variant -eq "cuda") {
    if (-not $env:CUDA_PATH) { throw "CUDA_PATH is not set: install the CUDA Toolkit 12.x first" }
    $env:CMAKE_ARGS = "-DGGML_CUDA=on $cpuArgs -DCMAKE_CUDA_ARCHITECTURES=$CudaArchitectures"
    # ggml-cuda.dll needs cudart/cublas at run time; with CUDA's bin folder on PATH
    # PyInstaller finds them and copies them into the bundle.
    $env:PATH = "$(Join-Path $env:CUDA_PATH 'bin');$env:PATH"
} else {
    $env:CMAKE_ARGS = $cpuArgs
}
if (-not $SkipLlamaBuild) {
    Step "building llama-cpp-python $LlamaVersion ($Variant) with CMAKE_ARGS=$env:CMAKE_ARGS"
    $env:FORCE_CMAKE = "1"
    Invoke-Checked $Py -m pip install --force-reinstall --no-cache-dir --no-binary llama-cpp-python `
        "llama-cpp-python==$LlamaVersion"
}

Step "installing SpecDeck's dependencies and PyInstaller"
Invoke-Checked $Py -m pip install --quiet . "pyinstaller>=6.10"

# --- bundle ------------------------------------------------------------------------------
$Version = (& $Py -c "import app; print(app.__version__)").Trim()
Step "PyInstaller: SpecDeck $Version"
if (Test-Path "dist\SpecDeck") { Remove-Item -Recurse -Force "dist\SpecDeck" }
Invoke-Checked $Py -m PyInstaller --noconfirm --log-level WARN --distpath dist `
    --workpath build\pyinstaller packaging\specdeck.spec

# Quick check of the frozen program: --version must print llama.cpp's system info.
# (Output is redirected to a file: a GUI-subsystem exe has no console of its own.)
$out = Join-Path $env:TEMP "specdeck-version.txt"
$p = Start-Process -FilePath "dist\SpecDeck\SpecDeck.exe" -ArgumentList "--version" -Wait -PassThru `
    -NoNewWindow -RedirectStandardOutput $out -RedirectStandardError "$out.err"
Get-Content $out, "$out.err" | Write-Host
if ($p.ExitCode -ne 0) {
    if ($Variant -eq "cuda") { Write-Warning "--version failed (expected on a machine without an NVIDIA driver)" }
    else { throw "dist\SpecDeck\SpecDeck.exe --version failed ($($p.ExitCode))" }
}
$size = (Get-ChildItem -Recurse "dist\SpecDeck" | Measure-Object -Property Length -Sum).Sum / 1MB
Step ("bundle: {0:N0} MiB in dist\SpecDeck" -f $size)

# --- installer ---------------------------------------------------------------------------
if (-not $NoInstaller) {
    $iscc = (Get-Command ISCC.exe -ErrorAction SilentlyContinue).Source
    if (-not $iscc) {
        foreach ($c in @("${env:ProgramFiles(x86)}\Inno Setup 6\ISCC.exe", "$env:ProgramFiles\Inno Setup 6\ISCC.exe",
                         "$env:LOCALAPPDATA\Programs\Inno Setup 6\ISCC.exe")) {
            if (Test-Path $c) { $iscc = $c; break }
        }
    }
    if (-not $iscc) { throw "ISCC.exe not found: install Inno Setup 6 (winget install JRSoftware.InnoSetup)" }
    Step "Inno Setup: $iscc"
    Invoke-Checked $iscc /Q "/DAppVersion=$Version" "/DVariant=$Variant" packaging\windows\specdeck.iss
    Get-ChildItem dist\SpecDeck-Setup*.exe | ForEach-Object { Step ("{0} ({1:N0} MiB)" -f $_.Name, ($_.Length / 1MB)) }
}

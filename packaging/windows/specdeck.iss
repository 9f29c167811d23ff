; Inno Setup 6 script for SpecDeck -> dist\SpecDeck-Setup.exe
;
; Build the PyInstaller bundle first (dist\SpecDeck\SpecDeck.exe), then:
;   ISCC.exe /DAppVersion=0.1.0 /DVariant=cpu packaging\windows\specdeck.iss
; or simply run packaging\windows\build.ps1, which does both.
;
; Installs per user by default (no administrator prompt; "Install for all users" is offered
; in the first dialog), adds a Start-menu shortcut, an optional desktop shortcut and an
; uninstaller (Settings > Apps). Settings, models and conversations live in
; %LOCALAPPDATA%\specdeck and %APPDATA%\specdeck, never in the install folder, and are
; kept when SpecDeck is uninstalled unless the user ticks the box offered at uninstall.

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#ifndef Variant
  #define Variant "cpu"
#endif
#ifndef SourceDir
  #define SourceDir "..\..\dist\SpecDeck"
#endif
#ifndef OutputDir
  #define OutputDir "..\..\dist"
#endif
#if Variant == "cpu"
  #define SetupName "SpecDeck-Setup"
#else
  #define SetupName "SpecDeck-Setup-" + Variant
#endif

#define AppName "SpecDeck"
#define AppExe "SpecDeck.exe"
#define AppId "io.github.specdeck.SpecDeck"

[Setup]
; AppId must never change between releases: it ties upgrades and the uninstaller together.
AppId={{D47AF38F-EC97-41F3-83B1-A309C3E5057B}
AppName={#AppName}
AppVersion={#AppVersion}
AppVerName={#AppName} {#AppVersion}
AppPublisher=SpecDeck developers
AppPublisherURL=https://github.com/specdeck/SpecDeck
AppSupportURL=https://github.com/specdeck/SpecDeck/issues
AppUpdatesURL=https://github.com/specdeck/SpecDeck/releases
AppCopyright=Copyright 2026 SpecDeck developers
VersionInfoVersion={#AppVersion}
VersionInfoProductName={#AppName}
VersionInfoDescription={#AppName} installer ({#Variant})
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
MinVersion=10.0
OutputDir={#OutputDir}
OutputBaseFilename={#SetupName}
SetupIconFile=..\..\resources\icons\specdeck.ico
UninstallDisplayIcon={app}\{#AppExe}
UninstallDisplayName={#AppName}
Compression=lzma2/max
SolidCompression=yes
LZMAUseSeparateProcess=yes
WizardStyle=modern
CloseApplications=yes
RestartApplications=no
ChangesAssociations=no
ChangesEnvironment=no

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[InstallDelete]
; An upgrade replaces the whole program folder, so files that a new version no longer ships
; (old DLLs, plugins) do not linger next to the new ones.
Type: filesandordirs; Name: "{app}\_internal"

[Files]
Source: "{#SourceDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\{#AppName}"; Filename: "{app}\{#AppExe}"; WorkingDir: "{app}"; Comment: "Speculative decoding on llama.cpp"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppExe}"; WorkingDir: "{app}"; Tasks: desktopicon

[Run]
Filename: "{app}\{#AppExe}"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent

[Code]
var
  RemoveUserData: Boolean;

function InitializeUninstall(): Boolean;
begin
  Result := True;
  RemoveUserData := False;
  if not UninstallSilent() then
    RemoveUserData := MsgBox('Also delete SpecDeck''s settings, conversations and downloaded models?' + #13#10 +
      '(Choose No to keep them for a later reinstall.)', mbConfirmation, MB_YESNO or MB_DEFBUTTON2) = IDYES;
end;

procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
begin
  if (CurUninstallStep = usPostUninstall) and RemoveUserData then
  begin
    DelTree(ExpandConstant('{localappdata}\specdeck'), True, True, True);
    DelTree(ExpandConstant('{userappdata}\specdeck'), True, True, True);
  end;
end;
